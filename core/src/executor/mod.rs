//! The turn executor seam to Helix Ask. The service owns deadlines, cancellation and
//! re-entry; an executor only turns one request into one artifact. Executors must not
//! depend on `store`, `service` or `http`.

pub mod http;
#[cfg(feature = "local-executor")]
pub mod local;
pub mod scripted;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::domain::run::Answer;
use crate::domain::turn::{TurnArtifact, TurnFailure};

pub const TURN_REQUEST_SCHEMA: &str = "helix.turn_request.v1";
/// v1 plus `room_evidence`: sent only for a turn that carries bound-room observations,
/// so a v1 solver never receives a field it does not know.
pub const TURN_REQUEST_SCHEMA_V2: &str = "helix.turn_request.v2";
/// v2 plus `room_probe`: sent only for a turn that carries an answered environment probe.
pub const TURN_REQUEST_SCHEMA_V3: &str = "helix.turn_request.v3";
/// v3 plus `conversation_context`: sent only for a turn of a run bound to a browser chat
/// whose snapshot is stored.
pub const TURN_REQUEST_SCHEMA_V4: &str = "helix.turn_request.v4";

/// How a turn may act. The external Helix Ask turn runs in read mode only: it may call
/// the admitted read capabilities and nothing else, and any room change it asks for is a
/// confirmation-governed request the service applies only with an approval receipt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnMode {
    #[default]
    Read,
}

/// One turn's input (the `http` executor's request body, versioned).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    pub schema: String,
    /// Always `read`: declared on every request, so the solver's menu and its runtime
    /// call validation know the turn is read-only.
    #[serde(default)]
    pub mode: TurnMode,
    pub run_id: String,
    pub step: u32,
    /// Bound into the terminal signature: the single-writer identity of this turn.
    pub claim_token: String,
    pub objective: String,
    pub constraints: Vec<String>,
    pub instruction: Option<String>,
    pub answers: Vec<Answer>,
    /// The exact admitted read capabilities; nothing else may be called.
    pub capabilities: Vec<String>,
    pub required_evidence_families: Vec<String>,
    /// Evidence already admitted by earlier turns (refs only).
    pub prior_evidence_refs: Vec<String>,
    pub deadline: DateTime<Utc>,
    /// The admitted bound-room observations of this turn (v2 only; absent in v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_evidence: Option<crate::domain::source::RoomEvidenceInput>,
    /// The answered environment probe of this turn (v3 only; absent in v1 and v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_probe: Option<crate::domain::source::RoomProbeInput>,
    /// The bound chat's snapshot as quoted, redacted, untrusted context (v4 only): never
    /// an instruction, a capability or evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_context: Option<crate::domain::turn::ConversationContext>,
}

impl TurnRequest {
    /// The schema version this request is: v4 exactly when it carries conversation
    /// context, else v3 exactly when it carries a probe answer, else v2 exactly when it
    /// carries room evidence, else v1.
    pub fn schema_version(&self) -> &'static str {
        if self.conversation_context.is_some() {
            TURN_REQUEST_SCHEMA_V4
        } else if self.room_probe.is_some() {
            TURN_REQUEST_SCHEMA_V3
        } else if self.room_evidence.is_some() {
            TURN_REQUEST_SCHEMA_V2
        } else {
            TURN_REQUEST_SCHEMA
        }
    }
}

#[async_trait]
pub trait TurnExecutor: Send + Sync + 'static {
    /// Runs one turn. The service races this against the deadline and `cancel`;
    /// implementations should also stop early when `cancel` fires.
    async fn execute(&self, request: TurnRequest, cancel: CancellationToken) -> Result<TurnArtifact, TurnFailure>;
}

/// Used when no executor is configured: every turn fails its step, typed.
pub struct Unconfigured;

#[async_trait]
impl TurnExecutor for Unconfigured {
    async fn execute(&self, _: TurnRequest, _: CancellationToken) -> Result<TurnArtifact, TurnFailure> {
        Err(TurnFailure::ExecutorUnavailable)
    }
}
