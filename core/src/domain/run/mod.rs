//! The run: the status vocabulary here, the wire requests (strict) in `requests`, the
//! stored record and its public projection in `record`. Transitions live in `turn`
//! (continue) and in `record` (cancel). Depends on the domain only.

mod listing;
mod record;
mod requests;

pub use listing::{
    DEFAULT_EVENT_LIMIT, EVENT_LIMIT, EventQuery, RunListParams, RunListQuery, StatusFilter, check_event_limit,
};
pub use record::*;
pub use requests::*;

use serde::{Deserialize, Serialize};

pub const RUN_SCHEMA: &str = "helix.agent_run.v1";
pub const RUNTIME_PROVIDER: &str = "helix_ask";
pub const MAX_OBJECTIVE_CHARS: usize = 4000;
pub const MAX_CONSTRAINTS: usize = 32;
pub const MAX_CONSTRAINT_CHARS: usize = 1000;
pub const MAX_INSTRUCTION_CHARS: usize = 4000;
pub const MAX_ANSWERS: usize = 32;
pub const MAX_REASON_CHARS: usize = 1000;
pub const OUTPUT_FIELDS: &[&str] = &["text", "supporting_evidence_refs"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    Queued,
    Running,
    Waiting,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    Pending,
    Completed,
    NeedsMoreEvidence,
    NeedsInput,
    ConflictDetected,
    Blocked,
    Failed,
    BudgetExhausted,
    Cancelled,
}

impl Completion {
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::BudgetExhausted | Self::Cancelled)
    }

    /// The wire name (the serde name), for error details.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Completed => "completed",
            Self::NeedsMoreEvidence => "needs_more_evidence",
            Self::NeedsInput => "needs_input",
            Self::ConflictDetected => "conflict_detected",
            Self::Blocked => "blocked",
            Self::Failed => "failed",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// No turn has been evaluated yet.
    NotEvaluated,
    /// The contract does not require terminal authority.
    NotRequired,
    /// Evaluated: no terminal candidate was offered this turn.
    Missing,
    /// Evaluated: a candidate failed verification.
    Rejected,
    /// Evaluated: a hard gate (scope-required evidence) blocks authority.
    Blocked,
    Authorized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NextAction {
    Continue,
    AnswerQuestions,
    /// A turn holds the run: poll it (only ever observed, never stored).
    Wait,
    Stop,
}
