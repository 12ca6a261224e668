//! The requests of the source lane (create, claim, rotate/revoke) and their checks.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::secrets::token_ok;
use super::{AdapterProfile, WORLD_ID_MAX_CHARS, adapter};
use crate::domain::room::credential_shaped;

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
            if credential_shaped(label) {
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
#[cfg(test)]
mod tests {
    use super::*;

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
}
