//! Minecraft Player Embodiment: typed player actions (`action`), durable workflows and
//! their verification (`workflow`), the southbound connector protocol (`protocol`), and
//! the northbound views and identifiers here. Environment-native player ids never leave
//! the southbound side: northbound a subject is a room-scoped opaque `subject_ref`.
//! No I/O; must not depend on `store` or `service`.

pub mod action;
pub mod bounds;
pub mod chat;
pub mod ids;
pub mod protocol;
pub mod refusal;
pub mod workflow;

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize, Serializer};

pub use action::{Action, ActionRefusal, Region, Step};
pub use bounds::{REACH_BLOCKS, RegionBox, within_reach};
pub use protocol::StepObservation;
pub use workflow::{LateAck, WorkflowState, postcondition_met};

use crate::domain::room::FalseFlags;
use crate::domain::wire::constant;
use crate::domain::{hash_parts, random_hex};

pub const SUBJECT_LIST_SCHEMA: &str = "helix.environment_subject_list.v1";
pub const SUBJECT_SELECTION_SCHEMA: &str = "helix.environment_subject_selection.v1";
pub const WORKFLOW_SCHEMA: &str = "helix.minecraft_workflow.v1";
pub const PAIRING_SCHEMA: &str = "helix.room_connector_pairing.v1";
pub const REGISTER_SCHEMA: &str = "helix.connector_registration.v1";
pub const POLL_SCHEMA: &str = "helix.connector_poll.v1";

constant!(
    /// `helix.environment_subject_list.v1`
    SubjectListSchemaName = SUBJECT_LIST_SCHEMA
);
constant!(
    /// `helix.environment_subject_selection.v1`
    SubjectSelectionSchemaName = SUBJECT_SELECTION_SCHEMA
);
constant!(
    /// `helix.minecraft_workflow.v1`
    WorkflowSchemaName = WORKFLOW_SCHEMA
);

/// Hex digits after the prefix of an embodiment reference.
const OPAQUE_HEX: usize = 20;

fn opaque(prefix: &str, raw: &str) -> bool {
    raw.strip_prefix(prefix)
        .is_some_and(|h| h.len() == OPAQUE_HEX && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

macro_rules! opaque_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(raw: &str) -> Option<Self> {
                opaque($prefix, raw).then(|| Self(raw.to_owned()))
            }
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, random_hex(10)))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        /// The published schema: exactly the shape [`Self::parse`] takes.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                crate::domain::room::opaque_schema($prefix, OPAQUE_HEX)
            }
        }
    };
}

opaque_id!(
    /// An environment binding: one action-connector pairing of one room and world (`env_` + 20 hex).
    EnvBindingId, "env_"
);
opaque_id!(
    /// A durable workflow (`wf_` + 20 hex).
    WorkflowRef, "wf_"
);

/// A room-scoped opaque subject reference (`sub_` + 20 hex). It is derived from the
/// room, the binding, the directory generation and the native id, so it reveals none
/// of them, differs per room, and goes stale when the directory changes.
pub fn subject_ref(room_id: &str, binding_id: &str, directory_generation: u64, native_id: &str) -> String {
    let h = hash_parts(&["embodiment-subject.v1", room_id, binding_id, &directory_generation.to_string(), native_id]);
    format!("sub_{}", &h[..20])
}

/// Whether a string has the shape of a subject reference.
pub fn is_subject_ref(raw: &str) -> bool {
    opaque("sub_", raw)
}

/// The SHA-256 of the admitted action schema (a connector registers with it).
pub fn action_schema_hash() -> String {
    let schema = schemars::schema_for!(Action);
    crate::domain::sha256_hex(serde_json::to_string(&schema).expect("a schema serializes"))
}

/// One subject as listed northbound (no native id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SubjectView {
    pub subject_ref: String,
    pub display_name: String,
    pub online: bool,
    /// Selected by the caller.
    pub selected_by_caller: bool,
    /// Held by another member (its identity is not shown).
    pub held_by_other: bool,
    /// A member's Emergency Stop of this subject is active (only a person clears it, in
    /// the browser); the environment's own stop is `emergency_stop_active` above it.
    pub subject_stop_active: bool,
}

/// The caller's own binding in one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct OwnBinding {
    pub subject_ref: String,
    /// The control lease is live.
    pub lease_live: bool,
    pub lease_expires_at: String,
}

/// One environment binding of the room, with its sanitized directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct EnvironmentView {
    pub environment_binding_id: String,
    pub world_id: String,
    pub label: Option<String>,
    /// A connector registered and reached Helix recently.
    pub connector_live: bool,
    pub emergency_stop_active: bool,
    pub subjects: Vec<SubjectView>,
    pub own_binding: Option<OwnBinding>,
}

/// `helix.environment_subject_list.v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SubjectList {
    pub schema: SubjectListSchemaName,
    pub room_id: String,
    pub environments: Vec<EnvironmentView>,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// `helix.environment_subject_selection.v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SubjectSelection {
    pub schema: SubjectSelectionSchemaName,
    pub room_id: String,
    pub environment_binding_id: String,
    pub subject_ref: String,
    pub lease_expires_at: String,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// A workflow's step budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowBudget {
    pub steps_total: u32,
    pub steps_done: u32,
    pub block_changes_used: u32,
    pub block_changes_max: u32,
    /// The step budget of any workflow (a sequence has at most this many steps).
    #[serde(default = "steps_max")]
    pub steps_max: u32,
}

fn steps_max() -> u32 {
    action::MAX_SEQUENCE_STEPS as u32
}

/// `helix.minecraft_workflow.v1`: a workflow as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowView {
    pub schema: String,
    pub workflow_ref: String,
    pub room_id: String,
    pub environment_binding_id: String,
    pub subject_ref: String,
    pub status: WorkflowState,
    /// Why it failed, was rejected, paused or is of unknown outcome.
    pub reason: Option<String>,
    /// The current step (0-based).
    pub step: u32,
    pub budget: WorkflowBudget,
    pub last_observation_at: Option<String>,
    /// A command is or may be at the connector, or was taken from it while it held a
    /// mutating step: effects may still arrive (or arrived: `late_acknowledgements`).
    pub late_effects_possible: bool,
    /// What the connector reported after Helix took its command (stop, cancel, pause,
    /// deadline), oldest first.
    #[serde(default)]
    pub late_acknowledgements: Vec<LateAck>,
    /// When to ask again (null once terminal).
    pub poll_after_ms: Option<u64>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(flatten)]
    #[schemars(with = "FalseFlags")]
    pub flags: StoredFlags,
}

/// The four false flags in a form that also reads back from a stored receipt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFlags {
    #[serde(default)]
    pub answer_authority: FalseBool,
    #[serde(default)]
    pub assistant_answer: FalseBool,
    #[serde(default)]
    pub terminal_eligible: FalseBool,
    #[serde(default)]
    pub raw_content_included: FalseBool,
}

/// `false`, written and read (anything else does not read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FalseBool;

impl Serialize for FalseBool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(false)
    }
}

impl<'de> Deserialize<'de> for FalseBool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match bool::deserialize(d)? {
            false => Ok(FalseBool),
            true => Err(serde::de::Error::custom("flag must be false")),
        }
    }
}

/// The cookie route's body: pair an action connector for one room and world.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairingRequest {
    pub room_id: String,
    pub world_id: String,
}

/// The connector configuration the pairing page shows once (no credential in it: the
/// credential goes into `HELIX_CONNECTOR_CREDENTIAL`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorConfig {
    pub protocol: String,
    pub base_url: String,
    pub environment_binding_id: String,
    pub room_id: String,
    pub world_id: String,
    pub credential_env: String,
    pub poll_interval_ms: u64,
}

/// `helix.room_connector_pairing.v1`: the one response that shows a connector credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PairingCreated {
    pub schema: &'static str,
    pub environment_binding_id: String,
    pub room_id: String,
    pub world_id: String,
    pub connector_credential: String,
    pub connector_config: ConnectorConfig,
    pub shown_once: bool,
    /// This credential drives players: it is never a source bearer.
    pub action_credential: bool,
}

/// The answer of clearing an Emergency Stop (cookie lane): the binding is no longer
/// stopped; `emergency_stop_generation` is present when this call cleared it (absent
/// when it was not stopped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct StopCleared {
    pub environment_binding_id: String,
    pub emergency_stop_active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emergency_stop_generation: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_refs_are_room_scoped_opaque_and_change_with_the_directory() {
        let native = "069a79f4-44e9-4726-a5be-fca90e38aaf5";
        let a = subject_ref("room_1", "env_1", 1, native);
        assert!(is_subject_ref(&a) && !a.contains(native) && !a.contains("069a79f4"));
        assert_ne!(a, subject_ref("room_2", "env_1", 1, native), "another room, another ref");
        assert_ne!(a, subject_ref("room_1", "env_1", 2, native), "a changed directory makes it stale");
        assert_eq!(a, subject_ref("room_1", "env_1", 1, native));
        assert!(EnvBindingId::parse(EnvBindingId::generate().as_str()).is_some());
        assert!(WorkflowRef::parse("wf_zz").is_none());
    }

    #[test]
    fn stored_flags_read_back_only_as_false() {
        let v = serde_json::to_value(StoredFlags::default()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"answer_authority": false, "assistant_answer": false, "terminal_eligible": false, "raw_content_included": false})
        );
        assert!(serde_json::from_value::<StoredFlags>(serde_json::json!({"answer_authority": true})).is_err());
    }
}
