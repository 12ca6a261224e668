//! The player-embodiment tools: their strict arguments and one handler each over the
//! embodiment service. The `action` argument publishes the admitted action schema; the
//! service parses it again and answers a typed refusal for anything outside it.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Cx, Reply, key};
use crate::domain::embodiment::Action;
use crate::error::ApiError;
use crate::service::embodiment::Control;

/// Arguments of helix_environment_subject_list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubjectListArgs {
    /// A room the caller is a member of (room_...).
    pub room_id: String,
}

/// Arguments of helix_environment_subject_select.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubjectSelectArgs {
    pub room_id: String,
    /// The environment binding (env_...) from helix_environment_subject_list.
    pub environment_binding_id: String,
    /// The exact sanitized subject_ref (sub_...) from a fresh helix_environment_subject_list.
    pub subject_ref: String,
}

/// Arguments of helix_minecraft_player_action.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayerActionArgs {
    pub room_id: String,
    /// Caller-chosen key of 8-200 visible ASCII characters: a retry with the same key and action answers the same workflow.
    pub idempotency_key: String,
    /// The environment (its environment_binding_id or world_id) when the caller selected subjects in more than one.
    #[serde(default)]
    pub environment: Option<String>,
    /// One typed action, tagged by type (e.g. {"type": "move_to", "x": 10, "y": 64, "z": -3}).
    #[schemars(with = "Action")]
    pub action: Value,
}

/// Arguments of helix_minecraft_workflow_status.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowArgs {
    pub room_id: String,
    /// The exact workflow_ref (wf_...) an action returned.
    pub workflow_ref: String,
}

/// Arguments of helix_minecraft_workflow_control.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlArgs {
    pub room_id: String,
    pub workflow_ref: String,
    /// resume (a paused workflow, after every check passes again), cancel (idempotent), or emergency_stop
    /// (the owner: the whole room; a member: their own selected subject).
    pub control: Control,
}

pub async fn subject_list(cx: Cx<'_>, a: SubjectListArgs) -> Result<impl Reply, ApiError> {
    cx.services.embodiment.list_subjects(cx.actor, &a.room_id).await
}

pub async fn subject_select(cx: Cx<'_>, a: SubjectSelectArgs) -> Result<impl Reply, ApiError> {
    cx.services.embodiment.select_subject(cx.actor, &a.room_id, &a.environment_binding_id, &a.subject_ref).await
}

pub async fn player_action(cx: Cx<'_>, a: PlayerActionArgs) -> Result<impl Reply, ApiError> {
    let k = key(&a.idempotency_key)?;
    cx.services.embodiment.player_action(cx.caller, &a.room_id, &k, a.environment.as_deref(), &a.action).await
}

pub async fn workflow_status(cx: Cx<'_>, a: WorkflowArgs) -> Result<impl Reply, ApiError> {
    cx.services.embodiment.workflow_status(cx.caller, &a.room_id, &a.workflow_ref).await
}

pub async fn workflow_control(cx: Cx<'_>, a: ControlArgs) -> Result<impl Reply, ApiError> {
    cx.services.embodiment.workflow_control(cx.caller, &a.room_id, &a.workflow_ref, a.control).await
}
