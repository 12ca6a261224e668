//! The southbound connector protocol, version 1: the bodies a connector sends and
//! receives (registration, the one poll carrying acknowledgements in and commands out).
//! Its JSON Schemas are generated from these types. Environment-native subject ids live
//! here and in the store only: nothing northbound (MCP, REST views) carries them. No I/O.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::Step;

/// The protocol version a connector speaks.
pub const PROTOCOL_V1: &str = "helix.connector.v1";
/// Where the connector routes live.
pub const CONNECTOR_BASE: &str = "/api/connectors/v1";
/// Most subjects one directory holds.
pub const MAX_SUBJECTS: usize = 32;
/// Most acknowledgements in one poll.
pub const MAX_ACKS: usize = 32;
/// Most commands one poll hands out.
pub const MAX_COMMANDS: usize = 8;

/// One player the connector can drive, with its environment-native id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportedSubject {
    /// The environment's own player id (a Minecraft UUID); never shown northbound.
    #[schemars(length(min = 1, max = 64))]
    pub native_id: String,
    #[schemars(length(min = 1, max = 64))]
    pub display_name: String,
    pub online: bool,
    /// The player's block position `[x, y, z]` (optional; reach is checked from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<[i32; 3]>,
}

/// The connector's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectorManifest {
    #[schemars(length(min = 1, max = 64))]
    pub connector_name: String,
    #[schemars(length(min = 1, max = 32))]
    pub connector_version: String,
    /// Must be the world the pairing names.
    pub world_id: String,
}

/// `POST …/register`: each registration raises the pairing's epoch (the fencing token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// `helix.connector.v1`.
    pub protocol: String,
    pub manifest: ConnectorManifest,
    /// The SHA-256 of the action schema the connector was built against
    /// ([`super::action_schema_hash`]); another schema is refused.
    pub schema_hash: String,
    /// The step types the connector executes (a subset of the v1 set).
    pub capabilities: Vec<String>,
    /// The subject directory.
    pub subjects: Vec<ReportedSubject>,
}

/// The answer to a registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RegisterReceipt {
    pub schema: String,
    pub environment_binding_id: String,
    /// The epoch every later write of this connector must carry.
    pub epoch: u64,
    pub poll_interval_ms: u64,
    /// The connector halts its players on its own after this long without reaching Helix.
    pub dead_man_ms: u64,
}

/// An acknowledgement's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AckStatus {
    /// The command was taken (recorded in the connector's ledger); nothing done yet.
    Accepted,
    /// The step is under way.
    Progress,
    /// The step finished; `observation` says what the world looks like now. Without one
    /// (its effect not readable yet, e.g. a chat echo) the workflow is `verifying` until a
    /// later `completed` of the same command carries it.
    Completed,
    /// The step failed without changing the world (`reason`).
    Failed,
    /// A person took the controls: the connector stopped at once.
    Overridden,
    /// The connector restarted while the step was under way (its ledger says so): a
    /// mutation may or may not have happened.
    Interrupted,
    /// The connector refused the command instead of accepting it, before touching the
    /// world (`reason`: `player_offline`, `not_in_inventory`, ...).
    Rejected,
}

/// One acknowledgement, conditional on command, lease token, epoch and sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    pub workflow_ref: String,
    pub lease_token: String,
    /// The step the acknowledgement is about (0-based).
    pub step_index: u32,
    /// Strictly increasing per command (per lease token), from 1.
    pub seq: u32,
    pub status: AckStatus,
    #[serde(default)]
    pub observation: Option<StepObservation>,
    /// A short machine reason for `failed` and `rejected` (`hazard`, `not_in_inventory`, ...).
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub reason: Option<String>,
}

/// `POST …/poll`: acknowledgements in, work out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PollRequest {
    /// The epoch of the connector's registration.
    pub epoch: u64,
    #[serde(default)]
    pub acks: Vec<Ack>,
    /// A changed subject directory (omit when unchanged).
    #[serde(default)]
    pub subjects: Option<Vec<ReportedSubject>>,
    /// The connector halted its players on its own (dead-man rule) since its last poll.
    #[serde(default)]
    pub dead_man_halted: bool,
}

/// The outcome of one acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AckResult {
    pub workflow_ref: String,
    pub seq: u32,
    /// `applied`; `recorded_late` (about a command Helix took back: recorded in the
    /// workflow, not applied); or why it was refused (`stale_epoch`, `lease_mismatch`,
    /// `stale_seq`, `unknown_workflow`, `not_at_connector`). Each is final: the
    /// acknowledgement is not sent again.
    pub outcome: String,
}

/// A leased command: one step of one workflow for one subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Command {
    pub workflow_ref: String,
    pub lease_token: String,
    pub step_index: u32,
    pub step: Step,
    /// The player to drive, by its environment-native id (southbound only).
    pub native_id: String,
    /// The step must be acknowledged terminally before this (epoch milliseconds).
    pub deadline_ms: i64,
}

/// The answer to a poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PollResponse {
    pub schema: String,
    pub epoch: u64,
    pub acks: Vec<AckResult>,
    pub commands: Vec<Command>,
    /// Workflows whose commands the connector must stop and drop now.
    pub cancel: Vec<String>,
    /// Raised by each Emergency Stop; while `emergency_stop_active`, halt every player.
    pub emergency_stop_generation: u64,
    pub emergency_stop_active: bool,
    /// The native ids of the players a member's Emergency Stop halts: halt exactly
    /// those and drop their commands (the others play on).
    #[serde(default)]
    pub stopped_subjects: Vec<String>,
    pub next_poll_ms: u64,
}

/// The protocol's JSON Schemas (draft 2020-12), by file stem: each request as Helix reads
/// it, each answer as Helix writes it. `docs/connector-protocol/<stem>.schema.json` is this
/// list, kept current by the test below.
pub fn protocol_schemas() -> Vec<(&'static str, serde_json::Value)> {
    use schemars::generate::SchemaSettings;
    fn read<T: JsonSchema>() -> serde_json::Value {
        let schema = SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>();
        serde_json::to_value(schema).expect("schemars output is JSON")
    }
    fn written<T: JsonSchema>() -> serde_json::Value {
        let schema = SchemaSettings::draft2020_12().for_serialize().into_generator().into_root_schema_for::<T>();
        serde_json::to_value(schema).expect("schemars output is JSON")
    }
    vec![
        ("register-request", read::<RegisterRequest>()),
        ("register-receipt", written::<RegisterReceipt>()),
        ("poll-request", read::<PollRequest>()),
        ("poll-response", written::<PollResponse>()),
    ]
}

/// What a connector reports of its subject after a step (the observation Helix verifies).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepObservation {
    /// The subject's block position after the step.
    #[serde(default)]
    pub position: Option<[i32; 3]>,
    /// The block id now at the step's target position (break/place).
    #[serde(default)]
    pub block_at_target: Option<String>,
    /// The item now in the step's slot (equip).
    #[serde(default)]
    pub equipped: Option<String>,
    /// Items added to the inventory by the step (craft), as (item, count).
    #[serde(default)]
    pub inventory_delta: Option<Vec<(String, i32)>>,
    /// The chat line the world echoed (chat).
    #[serde(default)]
    pub chat_echo: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/connector-protocol/*.schema.json` are these schemas;
    /// `HELIX_UPDATE_PROTOCOL_SCHEMAS=1` rewrites them.
    #[test]
    fn the_committed_protocol_schemas_are_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/connector-protocol");
        let update = std::env::var_os("HELIX_UPDATE_PROTOCOL_SCHEMAS").is_some();
        let mut stale = Vec::new();
        for (stem, schema) in protocol_schemas() {
            let path = dir.join(format!("{stem}.schema.json"));
            let want = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &want).unwrap();
            }
            if std::fs::read_to_string(&path).unwrap_or_default() != want {
                stale.push(stem);
            }
        }
        assert!(
            stale.is_empty(),
            "docs/connector-protocol is stale ({stale:?}): run \
             HELIX_UPDATE_PROTOCOL_SCHEMAS=1 cargo test -p helix-core --lib protocol_schemas"
        );
    }

    #[test]
    fn the_protocol_schemas_admit_a_poll_and_refuse_an_unknown_field() {
        let schemas = protocol_schemas();
        let poll = &schemas.iter().find(|(s, _)| *s == "poll-request").unwrap().1;
        let v = jsonschema::validator_for(poll).unwrap();
        let ack = serde_json::json!({"workflow_ref": "wf_1", "lease_token": "t", "step_index": 0, "seq": 1,
            "status": "completed", "observation": {"position": [1, 64, 0]}});
        assert!(v.is_valid(&serde_json::json!({"epoch": 1, "acks": [ack]})));
        assert!(!v.is_valid(&serde_json::json!({"epoch": 1, "extra": true})));
        let answer = PollResponse {
            schema: "helix.connector_poll.v1".into(),
            epoch: 1,
            acks: vec![],
            commands: vec![],
            cancel: vec!["wf_1".into()],
            emergency_stop_generation: 0,
            emergency_stop_active: false,
            stopped_subjects: vec!["player-1".into()],
            next_poll_ms: 500,
        };
        let response = &schemas.iter().find(|(s, _)| *s == "poll-response").unwrap().1;
        assert!(jsonschema::validator_for(response).unwrap().is_valid(&serde_json::to_value(answer).unwrap()));
    }
}
