//! The projections of the source lane: the source, its listing, creation with the
//! deferred delivery, the one credential response, revocation and ingress receipts.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AdapterProfile, PLUGIN_CONFIG_SCHEMA};
use crate::domain::room::FalseFlags;

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
    /// The `cursor` of the next page; null on the last page.
    pub next_cursor: Option<String>,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

impl SourceList {
    /// The listing as it leaves the service: serialized and redacted (the boundary every
    /// room output crosses), so that no credential-shaped value or key is ever listed.
    pub fn projected(&self) -> serde_json::Result<serde_json::Value> {
        Ok(crate::domain::room::redact(serde_json::to_value(self)?))
    }
}

/// Where a source's credential delivery stands, as a create (or its replay) answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// This response carries a usable `claim_handle` (a replay's is a fresh one that
    /// voided the handle answered before).
    Pending,
    /// The credential was claimed: the delivery is used, no handle is answered.
    Claimed,
    /// No handle can be answered: the source was revoked before its claim, its room is no
    /// longer the caller's, or it was created before replays could deliver again.
    Unavailable,
}

/// The deferred credential delivery: an opaque handle for the owner's browser, never the
/// bearer or the plugin configuration.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CredentialDelivery {
    /// Show-once: present exactly when `status` is `pending` (the store keeps only its
    /// hash; a replay of the create answers a fresh one while the credential is unclaimed).
    pub claim_handle: Option<String>,
    pub claim_url: String,
    /// When this response's handle stops being claimable.
    pub expires_at: String,
    pub status: DeliveryStatus,
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
