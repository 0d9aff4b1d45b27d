//! Review commands: `stale` (decisions whose context moved) and
//! `calibration` (confidence against outcomes).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use decision_store::calibration::{Calibration, CalibrationOptions, GroupBy, Metrics};
use decision_store::stale::StaleOptions;

use super::render::{short, table};
use super::{print_json, print_text, stdout, Format};
use crate::app::chart::svg;
use crate::app::errors::{CmdResult, Failure};
use crate::app::open::open_read;
use crate::app::text::{count, figure};

/// Output format of `calibration`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CalibrationFormat {
    #[default]
    Text,
    Json,
    /// The reliability diagram of the overall bins (`--by` does not apply):
    /// share held against confidence, with the diagonal and bin counts.
    Svg,
}

/// A version for a person: long hashes cut (JSON has them whole).
fn version(v: Option<&str>) -> String {
    v.map_or_else(|| "(none)".to_owned(), |v| short(v, 20))
}

pub fn stale(db: &Path, plan: Option<&str>, all: bool, format: Format) -> CmdResult {
    let store = open_read(db)?;
    let plan = plan.map(|p| store.find_plan(p)).transpose()?;
    let report = store.stale(StaleOptions { plan, all })?;
    let code = u8::from(!report.is_clean());
    if format == Format::Json {
        print_json(&report)?;
        return Ok(code);
    }
    let mut out = stdout();
    if report.checked_decisions == 0 {
        writeln!(out, "nothing stale: no decisions to check")?;
        out.flush()?;
        return Ok(code);
    }
    if report.is_clean() {
        writeln!(
            out,
            "nothing stale: {}, {} checked against the graph",
            count(report.checked_decisions, "decision"),
            count(report.checked_resources, "snapshot resource")
        )?;
        out.flush()?;
        return Ok(code);
    }
    writeln!(
        out,
        "{} stale and {} at risk, of {} checked",
        report.stale.len(),
        report.at_risk.len(),
        count(report.checked_decisions, "decision")
    )?;
    for s in &report.stale {
        let overturned = if s.effective { "" } else { "  (overturned)" };
        writeln!(
            out,
            "\nstale  {}  {} #{}  {}{overturned}",
            s.decision_id,
            s.decision_type,
            s.sequence,
            short(&s.chosen_option, 50)
        )?;
        writeln!(out, "  plan {}", s.plan_id)?;
        for r in &s.resources {
            match &r.current_version {
                Some(now) => writeln!(
                    out,
                    "  changed  {}  recorded {}, now {}",
                    r.resource_id,
                    version(r.recorded_version.as_deref()),
                    version(Some(now))
                )?,
                None => writeln!(
                    out,
                    "  missing  {}  recorded {}, not in the graph now",
                    r.resource_id,
                    version(r.recorded_version.as_deref())
                )?,
            }
        }
    }
    if !report.at_risk.is_empty() {
        writeln!(out, "\nat risk")?;
        let rows: Vec<Vec<String>> = report
            .at_risk
            .iter()
            .map(|a| {
                let what = match (a.decision_type, a.sequence) {
                    (Some(t), Some(n)) => format!("{t} #{n}"),
                    _ => "(not stored)".to_owned(),
                };
                let why = a
                    .because_of
                    .iter()
                    .map(|c| format!("{} {}", c.via.as_words(), c.stale_decision_id))
                    .collect::<Vec<_>>()
                    .join(", ");
                vec![a.decision_id.to_string(), what, why]
            })
            .collect();
        for line in table(&["DECISION", "WHAT", "BECAUSE"], &rows).lines() {
            writeln!(out, "  {line}")?;
        }
    }
    out.flush()?;
    Ok(code)
}

pub fn calibration(
    db: &Path,
    plan: Option<&str>,
    by: Option<GroupBy>,
    settled_after: u32,
    format: CalibrationFormat,
) -> CmdResult {
    let store = open_read(db)?;
    let plan = plan.map(|p| store.find_plan(p)).transpose()?;
    let report = store.calibration(CalibrationOptions { plan, by, settled_after })?;
    let m = &report.overall;
    if m.scored == 0 {
        let left_out = match report.unsettled {
            0 => String::new(),
            n => format!(" ({n} more left out by --settled-after {settled_after})"),
        };
        let why = match m.decisions {
            0 if report.unsettled == 0 => "the store holds no decisions".to_owned(),
            0 => format!("no decision is followed by {settled_after} later ones in its plan{left_out}"),
            1 => format!("the one decision counted has no confidence score{left_out}"),
            n => format!("none of the {n} decisions counted has a confidence score{left_out}"),
        };
        if format == CalibrationFormat::Json {
            // Scripts still get the document (its figures are null), and the status says why.
            print_json(&report)?;
            eprintln!("dstore: nothing to calibrate: {why}");
            return Ok(1);
        }
        return Err(Failure::with_code(1, format!("nothing to calibrate: {why}")));
    }
    match format {
        CalibrationFormat::Json => print_json(&report)?,
        CalibrationFormat::Text => print_text(&text(&report))?,
        CalibrationFormat::Svg => {
            let drawn = svg(&report).map_err(|e| Failure::environment(format!("drawing: {e}")))?;
            print_text(&drawn)?;
        }
    }
    Ok(0)
}

fn row(name: &str, m: &Metrics) -> Vec<String> {
    vec![
        name.to_owned(),
        m.scored.to_string(),
        m.unscored.to_string(),
        figure(m.mean_confidence),
        figure(m.share_held),
        figure(m.brier),
        figure(m.ece),
    ]
}

fn text(c: &Calibration) -> String {
    let m = &c.overall;
    let mut s = format!(
        "calibration of {}: {} with a confidence score, {} held, {} overturned",
        count(m.decisions, "decision"),
        m.scored,
        m.held,
        m.scored - m.held
    );
    if c.settled_after > 0 {
        let _ = write!(s, "; {} left out as not yet settled", c.unsettled);
    }
    s.push_str("\n\n");
    let mut rows = vec![row("overall", m)];
    rows.extend(c.groups.iter().map(|g| row(&g.key, &g.metrics)));
    let group = match c.by {
        Some(GroupBy::Type) => "TYPE",
        Some(GroupBy::Phase) => "PHASE",
        Some(GroupBy::Plan) => "PLAN",
        None => "",
    };
    s.push_str(&table(&[group, "SCORED", "UNSCORED", "MEAN CONF", "HELD", "BRIER", "ECE"], &rows));
    s.push_str("\nbins (overall)\n");
    let rows: Vec<Vec<String>> = m
        .bins
        .iter()
        .map(|b| {
            let close = if b.upper >= 1.0 { ']' } else { ')' };
            let bar = "#".repeat((b.count as f64 / m.scored as f64 * 40.0).round() as usize);
            vec![
                format!("[{:.1}, {:.1}{close}", b.lower, b.upper),
                b.count.to_string(),
                figure(b.mean_confidence),
                figure(b.share_held),
                bar,
            ]
        })
        .collect();
    for line in table(&["BIN", "N", "MEAN CONF", "HELD", ""], &rows).lines() {
        s.push_str("  ");
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}
