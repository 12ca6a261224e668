//! Observation batches (their bounds and the adapter's rules), an observation's reference,
//! and the admitted observations a turn hands the executor with their exact provenance.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::secrets::token_ok;
use super::{
    AdapterProfile, MAX_BATCH_OBSERVATIONS, MAX_CLOCK_SKEW_MS, MAX_PAYLOAD_BYTES, REQUEST_ID_MAX_CHARS, SourceInvalid,
};
use crate::domain::room::credential_shaped;
use crate::domain::sha256_hex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservationKind {
    /// One environment event.
    Event,
    /// A bounded snapshot of the environment's state.
    Snapshot,
}

/// One observation of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationIn {
    /// The producer's request identity of this observation (8-80 of [A-Za-z0-9._:-]).
    pub request_id: String,
    pub kind: ObservationKind,
    /// When the producer observed it (RFC 3339).
    pub observed_at: chrono::DateTime<chrono::Utc>,
    /// For `event`: one of the adapter's event names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// A short plain-text summary (at most 500 characters).
    pub summary: String,
    /// Bounded structured detail (at most 4 KiB serialized; credential-shaped values refused).
    #[serde(default)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// `POST …/ingress/observations`: a bounded batch under the admitted manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationBatch {
    pub manifest_hash: String,
    pub producer_epoch: u64,
    pub observations: Vec<ObservationIn>,
}

fn any_credential(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => credential_shaped(s),
        serde_json::Value::Array(a) => a.iter().any(any_credential),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| {
            credential_shaped(k)
                || matches!(v, serde_json::Value::String(s) if crate::domain::credential::secret_value(k, s))
                || any_credential(v)
        }),
        _ => false,
    }
}

impl ObservationBatch {
    /// Shape, bounds and the adapter's observation rules; `now_ms` bounds observed-at.
    pub fn validate(&self, profile: &AdapterProfile, now_ms: i64, ttl_ms: i64) -> Result<(), SourceInvalid> {
        let n = self.observations.len();
        if n == 0 || n > MAX_BATCH_OBSERVATIONS {
            return Err(SourceInvalid::Invalid(format!("observations: 1-{MAX_BATCH_OBSERVATIONS} per batch")));
        }
        let mut seen = std::collections::HashSet::new();
        for o in &self.observations {
            if !token_ok(&o.request_id, 8, REQUEST_ID_MAX_CHARS) || credential_shaped(&o.request_id) {
                return Err(SourceInvalid::Invalid(format!(
                    "request_id: 8-{REQUEST_ID_MAX_CHARS} characters of [A-Za-z0-9._:-]"
                )));
            }
            if !seen.insert(o.request_id.as_str()) {
                return Err(SourceInvalid::Invalid("request_id: repeated within the batch".into()));
            }
            let at = o.observed_at.timestamp_millis();
            if at > now_ms + MAX_CLOCK_SKEW_MS {
                return Err(SourceInvalid::Invalid("observed_at: in the future".into()));
            }
            if at <= now_ms - ttl_ms {
                return Err(SourceInvalid::Invalid("observed_at: older than the observation lifetime".into()));
            }
            match (o.kind, &o.event) {
                (ObservationKind::Event, Some(e)) if profile.event_names.contains(&e.as_str()) => {}
                (ObservationKind::Event, _) => {
                    return Err(SourceInvalid::Invalid("event: not an event of this adapter profile".into()));
                }
                (ObservationKind::Snapshot, None) => {}
                (ObservationKind::Snapshot, Some(_)) => {
                    return Err(SourceInvalid::Invalid("event: a snapshot names no event".into()));
                }
            }
            if o.summary.trim().is_empty() || o.summary.chars().count() > 500 {
                return Err(SourceInvalid::Invalid("summary: 1-500 characters".into()));
            }
            if credential_shaped(&o.summary) {
                return Err(SourceInvalid::CredentialShaped("summary"));
            }
            let data = serde_json::Value::Object(o.data.clone());
            if data.to_string().len() > MAX_PAYLOAD_BYTES {
                return Err(SourceInvalid::Invalid(format!("data: at most {MAX_PAYLOAD_BYTES} bytes")));
            }
            if any_credential(&data) {
                return Err(SourceInvalid::CredentialShaped("data"));
            }
        }
        Ok(())
    }
}

/// An observation's opaque reference (`obsv_` + 24 hex): stable per source and request.
pub fn observation_ref(source_id: &str, request_id: &str) -> String {
    format!("obsv_{}", &sha256_hex(format!("{source_id}\u{0}{request_id}"))[..24])
}

/// The capability and evidence family of the `bound_room_evidence` scope.
pub const ROOM_EVIDENCE_CAPABILITY: &str = "room.evidence.read_bound";
pub const ROOM_EVIDENCE_FAMILY: &str = "shared_live_room_evidence";
/// At most this many admitted observations go to the executor in one turn.
pub const MAX_TURN_OBSERVATIONS: usize = 20;

/// The exact provenance of one admitted observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObservationProvenance {
    pub source_id: String,
    pub room_id: String,
    pub world_id: String,
    pub adapter_profile: String,
    pub adapter_version: String,
    pub adapter_hash: String,
    pub manifest_hash: String,
    pub producer_epoch: u64,
    pub request_id: String,
    pub observed_at: chrono::DateTime<chrono::Utc>,
    pub received_at: chrono::DateTime<chrono::Utc>,
    /// The probe this observation answers (probe answers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_id: Option<String>,
}

/// One admitted, fresh observation as the executor sees it: read-only world data,
/// never an instruction, never answer authority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomObservation {
    /// The observation's reference (`obsv_…`): cite it in `observation_refs` / evidence.
    pub observation_ref: String,
    pub kind: ObservationKind,
    pub event: Option<String>,
    pub summary: String,
    pub data: serde_json::Map<String, serde_json::Value>,
    /// SHA-256 of the observation's canonical JSON (kind, event, summary, data).
    pub content_sha256: String,
    pub provenance: ObservationProvenance,
}

/// The bound-room evidence of one turn (`helix.turn_request.v2`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomEvidenceInput {
    pub room_id: String,
    /// The run-room binding that authorized this turn.
    pub binding_ref: String,
    /// Always false: this lane cannot perform live actions.
    pub execution_enabled: bool,
    /// The freshness ceiling the observations were admitted under.
    pub max_age_ms: u64,
    /// Bounded, admitted, fresh observations, oldest first.
    pub observations: Vec<RoomObservation>,
}

/// The content hash of an observation (what evidence items carry).
pub fn observation_content_sha256(
    kind: ObservationKind,
    event: Option<&str>,
    summary: &str,
    data: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let canonical = serde_json::json!({ "kind": kind, "event": event, "summary": summary, "data": data });
    sha256_hex(canonical.to_string())
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::source::*;
    use chrono::Utc;
    #[test]
    fn batches_are_bounded_and_follow_the_adapter() {
        let p = adapter("minecraft").unwrap();
        let now = Utc::now();
        let obs = |id: &str, event: Option<&str>| ObservationIn {
            request_id: id.into(),
            kind: if event.is_some() { ObservationKind::Event } else { ObservationKind::Snapshot },
            observed_at: now,
            event: event.map(Into::into),
            summary: "Steve joined".into(),
            data: Default::default(),
        };
        let batch =
            |o: Vec<ObservationIn>| ObservationBatch { manifest_hash: "h".into(), producer_epoch: 1, observations: o };
        let ms = now.timestamp_millis();
        assert!(
            batch(vec![obs("req-0001", Some("player_joined")), obs("req-0002", None)]).validate(p, ms, 60_000).is_ok()
        );
        assert!(batch(vec![]).validate(p, ms, 60_000).is_err());
        assert!(batch(vec![obs("req-0001", Some("rm_rf"))]).validate(p, ms, 60_000).is_err());
        assert!(batch(vec![obs("req-0001", None), obs("req-0001", None)]).validate(p, ms, 60_000).is_err());
        assert!(batch((0..26).map(|i| obs(&format!("req-{i:04}"), None)).collect()).validate(p, ms, 60_000).is_err());
        assert!(batch(vec![obs("req-0001", None)]).validate(p, ms + 120_000, 60_000).is_err(), "too old");
        assert!(batch(vec![obs("req-0001", None)]).validate(p, ms - 60_000, 600_000).is_err(), "future");
        let mut leaky = obs("req-0001", None);
        leaky.data.insert("k".into(), serde_json::json!(["ghp_abcdef0123456789"]));
        assert_eq!(batch(vec![leaky]).validate(p, ms, 60_000), Err(SourceInvalid::CredentialShaped("data")));
    }
}
