//! A decision row's column texts and content hash: the part of an insert
//! that needs no database, so an import computes it on another thread
//! while the writer writes.

use serde::Serialize;

use super::column_json::ColumnJson;
use super::integrity;
use crate::decision::Decision;
use crate::hash::{self, Hash};
use crate::store::engine::ValueRef;

/// The column texts and content hash of a decision row: everything about
/// an insert that needs no database, so an import computes it on another
/// thread while this one writes.
///
/// The texts share one buffer (one allocation per row instead of eleven:
/// an import makes and frees 100,000 of these).
#[derive(Clone)]
pub(crate) struct PreparedRow {
    /// The row's texts one after another, in the order of [`RowText`].
    text: String,
    /// Where each [`RowText`] ends in `text`. An absent id (no parent, no
    /// corrected decision) is empty; a present one never is.
    ends: [u32; ROW_TEXTS],
    pub(super) content: Hash,
}

/// The texts of a [`PreparedRow`], in their order in its buffer.
#[derive(Clone, Copy)]
pub(super) enum RowText {
    Id,
    Plan,
    Parent,
    Corrects,
    Alternatives,
    Snapshot,
    Artifacts,
    DownstreamDecisions,
    DownstreamPlans,
    Metadata,
    /// `content` in hex, as the row stores it.
    ContentHex,
}
const ROW_TEXTS: usize = RowText::ContentHex as usize + 1;

/// A [`PreparedRow`]'s buffer while it is written.
struct RowTexts {
    bytes: Vec<u8>,
    ends: [u32; ROW_TEXTS],
}

impl Default for RowTexts {
    fn default() -> Self {
        // The ids, hashes and JSON columns of a typical decision fit; a larger one grows once or twice.
        RowTexts { bytes: Vec::with_capacity(1024), ends: [0; ROW_TEXTS] }
    }
}

impl RowTexts {
    fn push(&mut self, which: RowText, text: &[u8]) {
        self.bytes.extend_from_slice(text);
        self.end(which);
    }

    fn push_json<T: ColumnJson + Serialize + ?Sized>(&mut self, which: RowText, v: &T) {
        let start = self.bytes.len();
        v.write_json(&mut self.bytes);
        debug_assert_eq!(
            std::str::from_utf8(&self.bytes[start..]),
            Ok(&*serde_json::to_string(v).expect("in-memory values always serialize")),
            "column_json and serde_json disagree"
        );
        self.end(which);
    }

    fn end(&mut self, which: RowText) {
        self.ends[which as usize] = u32::try_from(self.bytes.len()).expect("a decision row is under 4 GiB");
    }
}

impl PreparedRow {
    pub(crate) fn of(d: &Decision) -> PreparedRow {
        let mut texts = RowTexts::default();
        let mut ulid = [0; 26];
        // `encode`, not `to_string`: no formatter for ids written by the hundred thousand.
        texts.push(RowText::Id, d.decision_id().encode(&mut ulid).as_bytes());
        texts.push(RowText::Plan, d.plan_id().encode(&mut ulid).as_bytes());
        texts.push(RowText::Parent, d.parent_decision_id().map_or(&[][..], |p| p.encode(&mut ulid).as_bytes()));
        texts.push(RowText::Corrects, d.corrects_decision_id().map_or(&[][..], |c| c.encode(&mut ulid).as_bytes()));
        texts.push_json(RowText::Alternatives, d.alternatives());
        texts.push_json(RowText::Snapshot, d.context_snapshot());
        texts.push_json(RowText::Artifacts, d.artifacts_produced());
        texts.push_json(RowText::DownstreamDecisions, d.downstream_decision_ids());
        texts.push_json(RowText::DownstreamPlans, d.downstream_plan_ids());
        // Any JSON value: serde_json's own writer.
        serde_json::to_writer(&mut texts.bytes, d.metadata()).expect("in-memory values always serialize");
        texts.end(RowText::Metadata);
        let mut row = PreparedRow {
            text: String::from_utf8(texts.bytes).expect("ids and serde_json's output are UTF-8"),
            ends: texts.ends,
            content: integrity::GENESIS,
        };
        // Hashed from the texts as they will be bound, so hash and row cannot disagree.
        row.content = integrity::decision_hash(&[
            ValueRef::Text(row.get(RowText::Id)),
            ValueRef::Text(row.get(RowText::Plan)),
            row.id(RowText::Parent).into(),
            ValueRef::Int(i64::from(d.sequence())),
            ValueRef::Text(d.decision_type().as_str()),
            ValueRef::Text(d.chosen_option()),
            ValueRef::Text(d.rationale()),
            d.confidence_score().map_or(ValueRef::Null, ValueRef::Real),
            ValueRef::Text(row.get(RowText::Alternatives)),
            ValueRef::Text(row.get(RowText::Snapshot)),
            ValueRef::Text(row.get(RowText::Artifacts)),
            row.id(RowText::Corrects).into(),
            ValueRef::Text(row.get(RowText::DownstreamDecisions)),
            ValueRef::Text(row.get(RowText::DownstreamPlans)),
            ValueRef::Text(row.get(RowText::Metadata)),
        ]);
        row.text.push_str(hash::hex_into(&row.content, &mut [0; 64]));
        row.ends[RowText::ContentHex as usize] = u32::try_from(row.text.len()).expect("a decision row is under 4 GiB");
        row
    }

    /// The row with `content` as its content hash instead of its own: a
    /// copy of a redacted decision, whose chain committed to the content it
    /// had before (its redaction entries hold what it hashes to now).
    pub(crate) fn with_content_hash(mut self, content: Hash) -> PreparedRow {
        let start = self.ends[RowText::ContentHex as usize - 1] as usize;
        self.text.truncate(start);
        self.text.push_str(hash::hex_into(&content, &mut [0; 64]));
        self.content = content;
        self
    }

    pub(super) fn get(&self, which: RowText) -> &str {
        let i = which as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// An id that may be absent (parent, corrected decision).
    pub(super) fn id(&self, which: RowText) -> Option<&str> {
        Some(self.get(which)).filter(|t| !t.is_empty())
    }
}

/// A decision with its row's column texts and content hash computed: most
/// of an insert's work that needs no database. A program that makes
/// decisions on one thread and writes them on another prepares them on the
/// first (as the Python package does when its writer falls behind), so that
/// [`Store::try_insert_prepared`] only writes.
#[derive(Clone)]
pub struct PreparedDecision {
    pub(crate) decision: Decision,
    pub(crate) row: PreparedRow,
}

impl PreparedDecision {
    pub fn new(decision: Decision) -> Self {
        let row = PreparedRow::of(&decision);
        PreparedDecision { decision, row }
    }

    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}

impl From<Decision> for PreparedDecision {
    fn from(decision: Decision) -> Self {
        PreparedDecision::new(decision)
    }
}

impl std::fmt::Debug for PreparedDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PreparedDecision").field(&self.decision.decision_id()).finish()
    }
}
