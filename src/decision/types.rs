//! The 11 decision types and the two planning phases they belong to.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// What kind of choice a decision records. Snake case on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionType {
    PromptDefinition,
    InvariantEnforced,
    StrategyChoice,
    ImplementationChoice,
    ResourceSelection,
    SubplanSpawn,
    SubplanParallelSpawn,
    ToolInvocation,
    ErrorRecovery,
    ValidationResponse,
    UserIntervention,
}

use DecisionType::*;

/// Types that belong to the strategize phase (7).
pub const STRATEGIZE_TYPES: [DecisionType; 7] = [
    PromptDefinition,
    InvariantEnforced,
    StrategyChoice,
    ResourceSelection,
    SubplanSpawn,
    SubplanParallelSpawn,
    UserIntervention,
];

/// Types that belong to the execute phase (8).
pub const EXECUTE_TYPES: [DecisionType; 8] = [
    ImplementationChoice,
    ResourceSelection,
    ToolInvocation,
    ErrorRecovery,
    ValidationResponse,
    SubplanSpawn,
    SubplanParallelSpawn,
    UserIntervention,
];

/// The planning phase a decision type belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Strategize,
    Execute,
    /// In both sets.
    Any,
}

impl DecisionType {
    /// All 11 types, in declaration order.
    pub const ALL: [DecisionType; 11] = [
        PromptDefinition,
        InvariantEnforced,
        StrategyChoice,
        ImplementationChoice,
        ResourceSelection,
        SubplanSpawn,
        SubplanParallelSpawn,
        ToolInvocation,
        ErrorRecovery,
        ValidationResponse,
        UserIntervention,
    ];

    /// The wire name, e.g. `"prompt_definition"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PromptDefinition => "prompt_definition",
            InvariantEnforced => "invariant_enforced",
            StrategyChoice => "strategy_choice",
            ImplementationChoice => "implementation_choice",
            ResourceSelection => "resource_selection",
            SubplanSpawn => "subplan_spawn",
            SubplanParallelSpawn => "subplan_parallel_spawn",
            ToolInvocation => "tool_invocation",
            ErrorRecovery => "error_recovery",
            ValidationResponse => "validation_response",
            UserIntervention => "user_intervention",
        }
    }

    /// In the strategize set.
    pub fn is_strategize_type(self) -> bool {
        STRATEGIZE_TYPES.contains(&self)
    }

    /// In the execute set.
    pub fn is_execute_type(self) -> bool {
        EXECUTE_TYPES.contains(&self)
    }

    /// In both sets.
    pub fn is_any_phase_type(self) -> bool {
        self.is_strategize_type() && self.is_execute_type()
    }

    /// The phase of the type.
    pub fn phase(self) -> Phase {
        match (self.is_strategize_type(), self.is_execute_type()) {
            (true, true) => Phase::Any,
            (true, false) => Phase::Strategize,
            _ => Phase::Execute,
        }
    }
}

impl fmt::Display for DecisionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl DecisionType {
    /// The type spelled by these bytes (a stored column's), if any.
    pub(crate) fn from_bytes(s: &[u8]) -> Option<Self> {
        Some(match s {
            b"prompt_definition" => PromptDefinition,
            b"invariant_enforced" => InvariantEnforced,
            b"strategy_choice" => StrategyChoice,
            b"implementation_choice" => ImplementationChoice,
            b"resource_selection" => ResourceSelection,
            b"subplan_spawn" => SubplanSpawn,
            b"subplan_parallel_spawn" => SubplanParallelSpawn,
            b"tool_invocation" => ToolInvocation,
            b"error_recovery" => ErrorRecovery,
            b"validation_response" => ValidationResponse,
            b"user_intervention" => UserIntervention,
            _ => return None,
        })
    }
}

impl FromStr for DecisionType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        DecisionType::from_bytes(s.as_bytes()).ok_or_else(|| {
            Error::validation(
                "decision_type",
                format!(
                    "unknown decision type {s:?} (expected one of: {})",
                    DecisionType::ALL.map(|t| t.as_str()).join(", ")
                ),
            )
        })
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Strategize => "strategize",
            Phase::Execute => "execute",
            Phase::Any => "any",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for t in DecisionType::ALL {
            assert_eq!(t.as_str().parse::<DecisionType>().unwrap(), t);
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{}\"", t.as_str()));
        }
        assert!("plan".parse::<DecisionType>().unwrap_err().to_string().contains("decision_type"));
    }

    #[test]
    fn phases_partition_the_types() {
        let any: Vec<_> = DecisionType::ALL.into_iter().filter(|t| t.is_any_phase_type()).collect();
        assert_eq!(any, [ResourceSelection, SubplanSpawn, SubplanParallelSpawn, UserIntervention]);
        assert!(DecisionType::ALL.iter().all(|t| t.is_strategize_type() || t.is_execute_type()));
    }
}
