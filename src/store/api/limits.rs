//! The most an agent's decision may hold, field by field, on every face
//! that takes one (`docs/agent-tools.md`, "Limits"): a field of text is
//! counted in characters, `metadata` in the bytes of its JSON.

/// `chosen_option`, and each alternative's `option`.
pub const OPTION_CHARS: usize = 10_000;
/// `rationale`, and each alternative's `rationale`.
pub const RATIONALE_CHARS: usize = 100_000;
/// `alternatives`, `artifacts_produced`, `observed`, `downstream_decision_ids`, `downstream_plan_ids`.
pub const LIST_ITEMS: usize = 1_000;
/// `metadata`, as JSON.
pub const METADATA_BYTES: usize = 100_000;
