//! The environment probe (`bound_room_environment_probe`): a probe's identity, what its
//! producer sees, the inventory-check answer and its checks, and the probe input of a turn.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::secrets::{opaque, token_ok};
use super::{MAX_CLOCK_SKEW_MS, REQUEST_ID_MAX_CHARS, RoomObservation, SourceInvalid};
use crate::domain::hash_parts;
use crate::domain::room::credential_shaped;

/// The logical data scope, its one capability and its evidence family.
pub const PROBE_SCOPE: &str = "bound_room_environment_probe";
pub const PROBE_CAPABILITY: &str = "com.casimirbot.minecraft.inventory.check";
pub const PROBE_FAMILY: &str = "shared_live_room_environment_probe";
/// At most this many pending probes in one poll answer.
pub const MAX_POLLED_PROBES: usize = 10;
/// Bounds of an inventory-check answer.
pub const MAX_INVENTORY_PLAYERS: usize = 20;
pub const MAX_INVENTORY_STACKS: usize = 64;
pub const MAX_STACK_COUNT: u32 = 1_000_000;
/// The serialized inventory of one answer, at most this many bytes.
pub const MAX_PROBE_ANSWER_BYTES: usize = 16 * 1024;

/// Where a probe stands: queued and answerable until its deadline, answered once, or
/// closed unanswered. Stored as `pending`, `answered`, `expired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeStatus {
    Pending,
    Answered,
    Expired,
}

impl ProbeStatus {
    /// The reason of `probe_not_pending` for a probe in this state (one answered is
    /// `answered`; anything else, closed or unknown, is `expired`).
    pub fn not_pending_reason(status: Option<Self>) -> &'static str {
        match status {
            Some(ProbeStatus::Answered) => "answered",
            _ => "expired",
        }
    }
}

/// A probe's identity (`prb_` + 24 hex): derived from the run, the step and the turn's
/// claim, so queueing the probe of one turn is idempotent and another turn gets another.
pub fn probe_id(run_id: &str, step: u32, claim_token: &str) -> String {
    format!("prb_{}", &hash_parts(&["helix-room-probe.v1", run_id, &step.to_string(), claim_token])[..PROBE_ID_HEX])
}

/// Hex digits after `prb_`.
const PROBE_ID_HEX: usize = 24;

pub fn probe_id_ok(raw: &str) -> bool {
    opaque("prb_", PROBE_ID_HEX, raw)
}

/// The published schema of a probe id (a path parameter): the shape [`probe_id_ok`] takes.
pub struct ProbeIdParam;

impl JsonSchema for ProbeIdParam {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProbeId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::domain::room::opaque_schema("prb_", PROBE_ID_HEX)
    }
}

/// One pending probe as its producer sees it: what to check, never the run, the caller
/// or the room's members. A probe is a read, never an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeView {
    /// `helix.room_source_probe.v1`.
    pub schema: String,
    pub probe_id: String,
    pub source_id: String,
    pub world_id: String,
    /// The capability to answer: `com.casimirbot.minecraft.inventory.check`.
    pub capability: String,
    pub requested_at: chrono::DateTime<chrono::Utc>,
    /// The answer is accepted until then (the turn's bounded wait).
    pub expires_at: chrono::DateTime<chrono::Utc>,
    pub read_only: bool,
    pub execution_enabled: bool,
}

/// `GET …/ingress/probes`: the pending, unexpired probes of the calling source only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeList {
    /// `helix.room_source_probe_list.v1`.
    pub schema: String,
    pub source_id: String,
    pub probes: Vec<ProbeView>,
}

/// One stack of one player's inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InventoryStack {
    /// The item id, 1-64 characters of [a-z0-9_:./-] (e.g. `minecraft:oak_log`).
    pub item: String,
    /// 1-1,000,000.
    pub count: u32,
}

/// One player's inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayerInventory {
    /// The in-world player name, 1-32 characters of [A-Za-z0-9_].
    pub player: String,
    /// At most 64 stacks.
    pub items: Vec<InventoryStack>,
}

/// The answer schema of `com.casimirbot.minecraft.inventory.check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InventoryCheck {
    /// The online players' inventories, at most 20.
    pub players: Vec<PlayerInventory>,
}

/// `POST …/ingress/probes/{probe_id}/answer`: the producer's answer under its admitted
/// manifest and epoch, with its own request identity and observed-at time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeAnswer {
    pub manifest_hash: String,
    pub producer_epoch: u64,
    /// The producer's request identity of this answer (8-80 of [A-Za-z0-9._:-]).
    pub request_id: String,
    /// When the producer observed the inventory (RFC 3339): not before the probe was requested.
    pub observed_at: chrono::DateTime<chrono::Utc>,
    /// A short plain-text summary (at most 500 characters).
    pub summary: String,
    pub inventory: InventoryCheck,
}

impl ProbeAnswer {
    /// Shape and bounds of the answer for `capability`; observed-at lies between the
    /// probe's request (less the clock skew) and now (plus the skew).
    pub fn validate(&self, capability: &str, requested_at_ms: i64, now_ms: i64) -> Result<(), SourceInvalid> {
        if capability != PROBE_CAPABILITY {
            return Err(SourceInvalid::Invalid("capability: not a probe capability".into()));
        }
        if !token_ok(&self.request_id, 8, REQUEST_ID_MAX_CHARS) || credential_shaped(&self.request_id) {
            return Err(SourceInvalid::Invalid(format!(
                "request_id: 8-{REQUEST_ID_MAX_CHARS} characters of [A-Za-z0-9._:-]"
            )));
        }
        let at = self.observed_at.timestamp_millis();
        if at > now_ms + MAX_CLOCK_SKEW_MS {
            return Err(SourceInvalid::Invalid("observed_at: in the future".into()));
        }
        if at < requested_at_ms - MAX_CLOCK_SKEW_MS {
            return Err(SourceInvalid::Invalid("observed_at: before the probe was requested".into()));
        }
        if self.summary.trim().is_empty() || self.summary.chars().count() > 500 {
            return Err(SourceInvalid::Invalid("summary: 1-500 characters".into()));
        }
        if credential_shaped(&self.summary) {
            return Err(SourceInvalid::CredentialShaped("summary"));
        }
        let players = &self.inventory.players;
        if players.len() > MAX_INVENTORY_PLAYERS {
            return Err(SourceInvalid::Invalid(format!("inventory.players: at most {MAX_INVENTORY_PLAYERS}")));
        }
        let name_ok =
            |s: &str| (1..=32).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let item_ok = |s: &str| {
            (1..=64).contains(&s.len())
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_:./-".contains(&b))
        };
        for p in players {
            if !name_ok(&p.player) {
                return Err(SourceInvalid::Invalid(
                    "inventory.players[].player: 1-32 characters of [A-Za-z0-9_]".into(),
                ));
            }
            if p.items.len() > MAX_INVENTORY_STACKS {
                return Err(SourceInvalid::Invalid(format!(
                    "inventory.players[].items: at most {MAX_INVENTORY_STACKS}"
                )));
            }
            for i in &p.items {
                if !item_ok(&i.item) || credential_shaped(&i.item) {
                    return Err(SourceInvalid::Invalid(
                        "inventory items: item is 1-64 characters of [a-z0-9_:./-]".into(),
                    ));
                }
                if !(1..=MAX_STACK_COUNT).contains(&i.count) {
                    return Err(SourceInvalid::Invalid(format!("inventory items: count is 1-{MAX_STACK_COUNT}")));
                }
            }
        }
        if serde_json::to_string(&self.inventory).map_or(usize::MAX, |s| s.len()) > MAX_PROBE_ANSWER_BYTES {
            return Err(SourceInvalid::Invalid(format!("inventory: at most {MAX_PROBE_ANSWER_BYTES} bytes")));
        }
        Ok(())
    }

    /// The answer as observation data: the capability and the inventory.
    pub fn data(&self, capability: &str) -> serde_json::Map<String, serde_json::Value> {
        let mut data = serde_json::Map::new();
        data.insert("capability".into(), serde_json::Value::String(capability.into()));
        data.insert("inventory".into(), serde_json::to_value(&self.inventory).unwrap_or_default());
        data
    }
}

/// `helix.room_source_probe_answer_receipt.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ProbeAnswerReceipt {
    pub schema: &'static str,
    pub probe_id: String,
    pub source_id: String,
    /// The observation the answer became (`obsv_…`).
    pub observation_ref: String,
    pub accepted: bool,
}

/// The answered probe of one turn (`helix.turn_request.v3`): a read-only observation of
/// the run's bound room, never an action and never an instruction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomProbeInput {
    pub probe_id: String,
    pub capability: String,
    pub room_id: String,
    /// The run-room binding that authorized this turn.
    pub binding_ref: String,
    /// Always false: a probe is never an action.
    pub execution_enabled: bool,
    /// The answer as a `snapshot` observation (data: `capability`, `inventory`), with its
    /// exact provenance including `probe_id`.
    pub answer: RoomObservation,
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::source::*;
    use chrono::Utc;
    #[test]
    fn only_an_answered_probe_is_refused_as_answered() {
        for (status, reason) in [
            (Some(ProbeStatus::Answered), "answered"),
            (Some(ProbeStatus::Expired), "expired"),
            (Some(ProbeStatus::Pending), "expired"),
            (None, "expired"),
        ] {
            assert_eq!(ProbeStatus::not_pending_reason(status), reason, "{status:?}");
        }
    }

    #[test]
    fn probe_answers_follow_the_inventory_schema() {
        let now = Utc::now();
        let ms = now.timestamp_millis();
        let answer = |players: Vec<PlayerInventory>| ProbeAnswer {
            manifest_hash: "h".into(),
            producer_epoch: 1,
            request_id: "probe-answer-01".into(),
            observed_at: now,
            summary: "2 players online".into(),
            inventory: InventoryCheck { players },
        };
        let steve = |item: &str, count| PlayerInventory {
            player: "Steve".into(),
            items: vec![InventoryStack { item: item.into(), count }],
        };
        assert!(answer(vec![steve("minecraft:oak_log", 12)]).validate(PROBE_CAPABILITY, ms, ms).is_ok());
        assert!(answer(vec![]).validate(PROBE_CAPABILITY, ms, ms).is_ok(), "nobody online is an answer");
        assert!(answer(vec![steve("minecraft:oak_log", 1)]).validate("room.evidence.read_bound", ms, ms).is_err());
        assert!(answer(vec![steve("Oak Log", 1)]).validate(PROBE_CAPABILITY, ms, ms).is_err());
        assert!(answer(vec![steve("minecraft:oak_log", 0)]).validate(PROBE_CAPABILITY, ms, ms).is_err());
        assert!(answer(vec![steve("ghp_abcdef0123456789abcd", 1)]).validate(PROBE_CAPABILITY, ms, ms).is_err());
        let many = (0..21).map(|_| steve("minecraft:dirt", 1)).collect();
        assert!(answer(many).validate(PROBE_CAPABILITY, ms, ms).is_err());
        assert!(
            answer(vec![]).validate(PROBE_CAPABILITY, ms + 60_000, ms + 60_000).is_err(),
            "observed before the request"
        );
        assert!(answer(vec![]).validate(PROBE_CAPABILITY, ms - 60_000, ms - 60_000).is_err(), "in the future");
        let id = probe_id("run_1", 2, "claim");
        assert!(probe_id_ok(&id) && id != probe_id("run_1", 2, "other") && id == probe_id("run_1", 2, "claim"));
        assert!(adapter("minecraft").unwrap().probe_capabilities.contains(&PROBE_CAPABILITY));
        assert!(adapter("fixture").unwrap().probe_capabilities.is_empty());
        let scope = crate::domain::scopes::lookup(PROBE_SCOPE).unwrap();
        assert_eq!((scope.capabilities, scope.evidence_family), (&[PROBE_CAPABILITY][..], PROBE_FAMILY));
        assert!(scope.room_bound);
    }
}
