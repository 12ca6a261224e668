//! Room sources as values: the code-owned environment adapter registry (`minecraft`,
//! `fixture`), source identifiers and their two secrets (the short-lived delivery claim
//! handle and the source bearer, both stored only as hashes), the wire requests and
//! projections of the source lane, manifests and observation batches with their checks.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::room::{FalseFlags, credential_shaped};
use super::{hash_parts, random_hex, sha256_hex};

pub const SOURCE_SCHEMA: &str = "helix.room_source.v1";
pub const SOURCE_LIST_SCHEMA: &str = "helix.room_source_list.v1";
pub const SOURCE_CREATED_SCHEMA: &str = "helix.room_source_created.v1";
pub const SOURCE_CREDENTIAL_SCHEMA: &str = "helix.room_source_credential.v1";
pub const SOURCE_REVOCATION_SCHEMA: &str = "helix.room_source_revocation.v1";
pub const MANIFEST_RECEIPT_SCHEMA: &str = "helix.room_source_manifest_receipt.v1";
pub const OBSERVATION_RECEIPT_SCHEMA: &str = "helix.room_source_observation_receipt.v1";
pub const PLUGIN_CONFIG_SCHEMA: &str = "helix.room_source_plugin_config.v1";
pub const PROBE_SCHEMA: &str = "helix.room_source_probe.v1";
pub const PROBE_LIST_SCHEMA: &str = "helix.room_source_probe_list.v1";
pub const PROBE_ANSWER_RECEIPT_SCHEMA: &str = "helix.room_source_probe_answer_receipt.v1";

/// World ids: 1-64 characters of `[A-Za-z0-9._:-]`.
pub const WORLD_ID_MAX_CHARS: usize = 64;
/// At most this many observations in one ingress batch ...
pub const MAX_BATCH_OBSERVATIONS: usize = 25;
/// ... each with a payload of at most this many bytes (serialized JSON).
pub const MAX_PAYLOAD_BYTES: usize = 4 * 1024;
/// Request ids of observations: 8-80 characters of `[A-Za-z0-9._:-]`.
pub const REQUEST_ID_MAX_CHARS: usize = 80;
/// How far in the future an observed-at time may be (producer clock skew).
pub const MAX_CLOCK_SKEW_MS: i64 = 5_000;

// ---------- the adapter registry (code-owned; configuration cannot invent profiles) ----------

/// One environment adapter profile the service admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterProfile {
    pub id: &'static str,
    /// The one admitted adapter version of this profile.
    pub version: &'static str,
    /// The observation event names this adapter may report.
    pub event_names: &'static [&'static str],
    /// Test and demo adapter only: never a production environment.
    pub fixture: bool,
    /// The environment-probe capabilities a producer of this adapter may answer.
    pub probe_capabilities: &'static [&'static str],
}

impl AdapterProfile {
    /// The adapter hash a producer must present: SHA-256 over the profile's exact
    /// observation contract, so a producer built for another contract is refused.
    pub fn adapter_hash(&self) -> String {
        let mut parts = vec!["helix-environment-adapter.v1", self.id, self.version];
        parts.extend_from_slice(self.event_names);
        format!("sha256:{}", hash_parts(&parts))
    }

    /// The manifest hash of a producer of this adapter for one world.
    pub fn manifest_hash(&self, world_id: &str) -> String {
        format!(
            "sha256:{}",
            hash_parts(&["helix-environment-manifest.v1", self.id, self.version, &self.adapter_hash(), world_id])
        )
    }
}

pub const REGISTRY: &[AdapterProfile] = &[
    AdapterProfile {
        id: "minecraft",
        version: "1.0.0",
        event_names: &[
            "player_joined",
            "player_left",
            "block_placed",
            "block_broken",
            "entity_spawned",
            "chat_message",
            "weather_changed",
            "inventory_changed",
        ],
        fixture: false,
        probe_capabilities: &[PROBE_CAPABILITY],
    },
    // The fixture adapter answers no probe: the one probe capability is Minecraft's own.
    AdapterProfile {
        id: "fixture",
        version: "1.0.0",
        event_names: &["fixture_tick", "fixture_marker"],
        fixture: true,
        probe_capabilities: &[],
    },
];

pub fn adapter(id: &str) -> Option<&'static AdapterProfile> {
    REGISTRY.iter().find(|a| a.id == id)
}

// ---------- identifiers and secrets ----------

fn opaque(prefix: &str, hex_len: usize, raw: &str) -> bool {
    raw.strip_prefix(prefix)
        .is_some_and(|h| h.len() == hex_len && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// A room source (`src_` + 20 hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct SourceId(String);

impl SourceId {
    pub fn parse(raw: &str) -> Option<Self> {
        opaque("src_", 20, raw).then(|| Self(raw.to_owned()))
    }
    pub fn generate() -> Self {
        Self(format!("src_{}", random_hex(10)))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! secret {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $domain:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, random_hex(32)))
            }
            pub fn parse(raw: &str) -> Option<Self> {
                opaque($prefix, 64, raw).then(|| Self(raw.to_owned()))
            }
            /// The raw value: only for the one response that shows it.
            pub fn expose(&self) -> &str {
                &self.0
            }
            /// The stored form.
            pub fn hash(&self) -> String {
                hash_parts(&[$domain, &self.0])
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}(<redacted>)", stringify!($name))
            }
        }
    };
}

secret!(
    /// The opaque, short-lived credential-delivery claim handle (`hsc_` + 64 hex).
    DeliveryHandle, "hsc_", "room-source-delivery.v1"
);
secret!(
    /// The source bearer a producer presents to ingress (`hsb_` + 64 hex).
    SourceBearer, "hsb_", "room-source-bearer.v1"
);

/// Constant-time equality of two stored hashes.
pub fn hashes_equal(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

fn token_ok(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

// ---------- requests ----------

/// Why a source request was refused; the message never echoes the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceInvalid {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}: credential-shaped values are refused")]
    CredentialShaped(&'static str),
}

/// `POST /api/v1/rooms/{room_id}/sources`: a read-only source binding for one adapter
/// profile and one world. Room, owner and source identity are server-derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSourceRequest {
    /// A profile of the code-owned adapter registry: `minecraft` or `fixture`.
    pub adapter_profile: String,
    /// The environment's world, 1-64 characters of [A-Za-z0-9._:-].
    pub world_id: String,
    /// Optional display label, at most 80 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl CreateSourceRequest {
    pub fn validate(&self) -> Result<&'static AdapterProfile, SourceInvalid> {
        if credential_shaped(&self.world_id) {
            return Err(SourceInvalid::CredentialShaped("world_id"));
        }
        if !token_ok(&self.world_id, 1, WORLD_ID_MAX_CHARS) {
            return Err(SourceInvalid::Invalid(format!(
                "world_id: must be 1-{WORLD_ID_MAX_CHARS} characters of [A-Za-z0-9._:-]"
            )));
        }
        if let Some(label) = &self.label {
            if label.chars().count() > 80 || label.chars().any(char::is_control) {
                return Err(SourceInvalid::Invalid("label: at most 80 characters, no control characters".into()));
            }
            if label.split_whitespace().any(credential_shaped) {
                return Err(SourceInvalid::CredentialShaped("label"));
            }
        }
        adapter(&self.adapter_profile).ok_or_else(|| {
            SourceInvalid::Invalid("adapter_profile: not a profile of the adapter registry (minecraft, fixture)".into())
        })
    }
}

/// `POST /api/account/room-sources/credential-claims` (cookie).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialClaimRequest {
    pub claim_handle: String,
}

/// Rotation and revocation of a source credential (cookie): the source, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    pub room_id: String,
    pub source_id: String,
}

/// `POST …/ingress/manifest`: what the producer declares before any observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub adapter_profile: String,
    pub adapter_version: String,
    pub adapter_hash: String,
    pub world_id: String,
    pub manifest_hash: String,
    /// Monotonic per source: a lower epoch than the admitted one is refused.
    pub producer_epoch: u64,
}

/// Why a manifest was not admitted (each its own reason, never the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestRefusal {
    Profile,
    Version,
    AdapterHash,
    World,
    ManifestHash,
}

impl ManifestRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            ManifestRefusal::Profile => "adapter_profile_mismatch",
            ManifestRefusal::Version => "adapter_version_not_admitted",
            ManifestRefusal::AdapterHash => "adapter_hash_mismatch",
            ManifestRefusal::World => "world_mismatch",
            ManifestRefusal::ManifestHash => "manifest_hash_mismatch",
        }
    }
}

impl Manifest {
    /// Admitted only when it matches the registry and the source exactly.
    pub fn check(&self, source_profile: &str, source_world: &str) -> Result<&'static AdapterProfile, ManifestRefusal> {
        let profile = adapter(source_profile).ok_or(ManifestRefusal::Profile)?;
        if self.adapter_profile != profile.id {
            return Err(ManifestRefusal::Profile);
        }
        if self.adapter_version != profile.version {
            return Err(ManifestRefusal::Version);
        }
        if !hashes_equal(&self.adapter_hash, &profile.adapter_hash()) {
            return Err(ManifestRefusal::AdapterHash);
        }
        if self.world_id != source_world {
            return Err(ManifestRefusal::World);
        }
        if !hashes_equal(&self.manifest_hash, &profile.manifest_hash(source_world)) {
            return Err(ManifestRefusal::ManifestHash);
        }
        Ok(profile)
    }
}

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
        serde_json::Value::String(s) => s.split_whitespace().any(credential_shaped) || credential_shaped(s),
        serde_json::Value::Array(a) => a.iter().any(any_credential),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| credential_shaped(k) || any_credential(v)),
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
            if o.summary.split_whitespace().any(credential_shaped) {
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

// ---------- projections ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// Created; its credential has not been claimed yet.
    AwaitingClaim,
    /// Credentialed: a producer may register and report.
    Active,
    /// Permanently revoked.
    Revoked,
}

/// The connection state of a source's producer (never its credential or endpoint).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ManifestState {
    pub admitted: bool,
    pub adapter_version: Option<String>,
    pub producer_epoch: Option<u64>,
    pub registered_at: Option<String>,
}

/// `helix.room_source.v1`: a read-only source binding (never a credential).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceView {
    pub schema: &'static str,
    pub source_id: String,
    pub room_id: String,
    pub adapter_profile: String,
    pub world_id: String,
    pub label: Option<String>,
    pub status: SourceStatus,
    /// A bearer has been claimed and is current.
    pub credentialed: bool,
    pub credential_generation: u32,
    pub manifest: ManifestState,
    /// Sources are read-only: observations and probe answers, never actions.
    pub read_only: bool,
    pub execution_enabled: bool,
    pub created_at: String,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// `helix.room_source_list.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceList {
    pub schema: &'static str,
    pub room_id: String,
    pub sources: Vec<SourceView>,
    pub has_more: bool,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// The deferred credential delivery: an opaque handle for the owner's browser, never the
/// bearer or the plugin configuration.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CredentialDelivery {
    /// Show-once (null on an idempotent replay: the store keeps only its hash).
    pub claim_handle: Option<String>,
    pub claim_url: String,
    pub expires_at: String,
    pub bearer_included: bool,
    pub plugin_config_included: bool,
}

/// `helix.room_source_created.v1`: the source projection plus its credential delivery.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceCreated {
    pub schema: &'static str,
    pub source: SourceView,
    pub credential_delivery: CredentialDelivery,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

/// What the producer (plugin) needs besides its bearer: where and as what to report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginConfig {
    pub schema: String,
    pub ingress_base_url: String,
    pub source_id: String,
    pub room_id: String,
    pub world_id: String,
    pub adapter_profile: String,
    pub adapter_version: String,
    pub adapter_hash: String,
    pub manifest_hash: String,
}

impl PluginConfig {
    pub fn new(base_url: &str, source_id: &str, room_id: &str, world_id: &str, profile: &AdapterProfile) -> Self {
        Self {
            schema: PLUGIN_CONFIG_SCHEMA.into(),
            ingress_base_url: format!("{base_url}{INGRESS_BASE}"),
            source_id: source_id.into(),
            room_id: room_id.into(),
            world_id: world_id.into(),
            adapter_profile: profile.id.into(),
            adapter_version: profile.version.into(),
            adapter_hash: profile.adapter_hash(),
            manifest_hash: profile.manifest_hash(world_id),
        }
    }
}

/// The ingress route group's prefix.
pub const INGRESS_BASE: &str = "/api/ingress/room-sources";

/// `helix.room_source_credential.v1`: the one browser response that shows the bearer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceCredential {
    pub schema: &'static str,
    pub source_id: String,
    pub room_id: String,
    pub source_bearer: String,
    pub plugin_config: PluginConfig,
    pub credential_generation: u32,
    /// The bearer is shown once; the service keeps only its hash.
    pub shown_once: bool,
    pub expires_at: String,
    /// It admits read-only observations and probe answers, never an action.
    pub action_credential: bool,
}

/// `helix.room_source_revocation.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceRevocation {
    pub schema: &'static str,
    pub source_id: String,
    pub status: SourceStatus,
    /// `revoked` or `already_revoked`.
    pub revocation_status: &'static str,
}

/// `helix.room_source_manifest_receipt.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ManifestReceipt {
    pub schema: &'static str,
    pub source_id: String,
    pub admitted: bool,
    pub producer_epoch: u64,
    pub manifest_hash: String,
}

/// `helix.room_source_observation_receipt.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ObservationReceipt {
    pub schema: &'static str,
    pub source_id: String,
    pub accepted: u32,
    pub expires_at: String,
}

/// An observation's opaque reference (`obsv_` + 24 hex): stable per source and request.
pub fn observation_ref(source_id: &str, request_id: &str) -> String {
    format!("obsv_{}", &sha256_hex(format!("{source_id}\u{0}{request_id}"))[..24])
}

pub const DEVICE_CHECK_SCHEMA: &str = "helix.environment_device_check.v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    /// The last observation is within the bound-room evidence freshness ceiling.
    Fresh,
    /// Older than the ceiling.
    Stale,
    /// Nothing observed (or everything observed has expired).
    NoObservations,
}

/// One source's connection health: never a credential, endpoint or player id.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceHealth {
    pub source_id: String,
    pub adapter_profile: String,
    pub status: SourceStatus,
    pub credentialed: bool,
    /// A producer manifest was registered under the current credential.
    pub registered: bool,
    /// That manifest was admitted against the registry and the source.
    pub admitted: bool,
    pub producer_epoch: Option<u64>,
    /// Milliseconds since the newest observation was observed (null: none).
    pub last_observation_age_ms: Option<u64>,
    pub freshness: Freshness,
}

/// One room of the caller with its sources.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RoomHealth {
    pub room_id: String,
    pub sources: Vec<SourceHealth>,
}

/// `helix.environment_device_check.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct DeviceCheckReport {
    pub schema: &'static str,
    pub rooms: Vec<RoomHealth>,
    pub freshness_max_age_ms: u64,
    pub checked_at: String,
    pub execution_enabled: bool,
    #[serde(flatten)]
    pub flags: FalseFlags,
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

// ---------- the environment probe (`bound_room_environment_probe`) ----------

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

/// A probe's identity (`prb_` + 24 hex): derived from the run, the step and the turn's
/// claim, so queueing the probe of one turn is idempotent and another turn gets another.
pub fn probe_id(run_id: &str, step: u32, claim_token: &str) -> String {
    format!("prb_{}", &hash_parts(&["helix-room-probe.v1", run_id, &step.to_string(), claim_token])[..24])
}

pub fn probe_id_ok(raw: &str) -> bool {
    opaque("prb_", 24, raw)
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
        if self.summary.split_whitespace().any(credential_shaped) {
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
    use chrono::Utc;

    #[test]
    fn the_registry_is_code_owned_and_hashes_are_stable() {
        let mc = adapter("minecraft").unwrap();
        assert!(!mc.fixture && adapter("fixture").unwrap().fixture);
        assert!(adapter("factorio").is_none());
        assert_eq!(mc.adapter_hash(), mc.adapter_hash());
        assert_ne!(mc.adapter_hash(), adapter("fixture").unwrap().adapter_hash());
        assert_ne!(mc.manifest_hash("w1"), mc.manifest_hash("w2"));
    }

    #[test]
    fn secrets_are_hashed_redacted_and_credential_shaped() {
        let b = SourceBearer::generate();
        assert!(SourceBearer::parse(b.expose()).is_some());
        assert!(DeliveryHandle::parse(b.expose()).is_none());
        assert!(!format!("{b:?}").contains(b.expose()));
        assert_ne!(b.hash(), b.expose());
        assert!(credential_shaped(b.expose()), "redaction removes a leaked bearer");
        assert!(credential_shaped(DeliveryHandle::generate().expose()));
        assert!(!credential_shaped(SourceId::generate().as_str()));
        assert!(hashes_equal(&b.hash(), &b.hash()) && !hashes_equal(&b.hash(), &SourceBearer::generate().hash()));
    }

    #[test]
    fn create_requests_check_profile_world_and_credentials() {
        let r = |p: &str, w: &str| CreateSourceRequest { adapter_profile: p.into(), world_id: w.into(), label: None };
        assert!(r("minecraft", "overworld-1").validate().is_ok());
        assert!(r("factorio", "w").validate().is_err());
        assert!(r("minecraft", "").validate().is_err());
        assert!(r("minecraft", "a/b").validate().is_err());
        assert_eq!(
            r("minecraft", "ghp_abcdef0123456789abcd").validate(),
            Err(SourceInvalid::CredentialShaped("world_id"))
        );
    }

    fn manifest(world: &str) -> Manifest {
        let p = adapter("minecraft").unwrap();
        Manifest {
            adapter_profile: p.id.into(),
            adapter_version: p.version.into(),
            adapter_hash: p.adapter_hash(),
            world_id: world.into(),
            manifest_hash: p.manifest_hash(world),
            producer_epoch: 1,
        }
    }

    #[test]
    fn manifests_must_match_the_registry_and_the_source_exactly() {
        assert!(manifest("w").check("minecraft", "w").is_ok());
        assert_eq!(manifest("w").check("fixture", "w"), Err(ManifestRefusal::Profile));
        assert_eq!(manifest("w").check("minecraft", "other"), Err(ManifestRefusal::World));
        let mut m = manifest("w");
        m.adapter_version = "2.0.0".into();
        assert_eq!(m.check("minecraft", "w"), Err(ManifestRefusal::Version));
        let mut m = manifest("w");
        m.adapter_hash = "sha256:00".into();
        assert_eq!(m.check("minecraft", "w"), Err(ManifestRefusal::AdapterHash));
        let mut m = manifest("w");
        m.manifest_hash = manifest("x").manifest_hash;
        assert_eq!(m.check("minecraft", "w"), Err(ManifestRefusal::ManifestHash));
    }

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
