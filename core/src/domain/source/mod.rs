//! Room sources as values: the code-owned environment adapter registry (`minecraft`,
//! `fixture`), source identifiers and their two secrets (the short-lived delivery claim
//! handle and the source bearer, both stored only as hashes), the wire requests and
//! projections of the source lane, manifests and observation batches with their checks.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

mod device_check;
mod manifest;
mod observation;
mod probe;
mod registry;
mod requests;
mod secrets;
mod views;

pub use device_check::*;
pub use manifest::*;
pub use observation::*;
pub use probe::*;
pub use registry::*;
pub use requests::*;
pub use secrets::*;
pub use views::*;

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
