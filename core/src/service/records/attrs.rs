//! Every attribute name the kernel stores, spelled once, and the few item helpers the
//! records share (optional attributes, empty-when-absent strings). Item kinds sharing a
//! name (`status`, `room_id`, ...) share the constant, so a rename is one edit and a
//! second spelling cannot drift. Stored names are a compatibility promise: never
//! change one. Depends on the store's item type only.

use crate::store::{Attr, Item};

// Identity and ownership.
pub(super) const ACCOUNT_ID: &str = "account_id";
pub(super) const OWNER_ACCOUNT: &str = "owner_account";
pub(super) const OWNER_HASH: &str = "owner_hash";
pub(super) const ROOM_ID: &str = "room_id";
pub(super) const RUN_ID: &str = "run_id";
pub(super) const SOURCE_ID: &str = "source_id";
pub(super) const PROBE_ID: &str = "probe_id";
pub(super) const OBSERVER_REF: &str = "observer_ref";
pub(super) const OBSERVATION_REF: &str = "observation_ref";
pub(super) const BINDING_REF: &str = "binding_ref";
pub(super) const WORLD_ID: &str = "world_id";

// State and guards.
pub(super) const STATUS: &str = "status";
pub(super) const STATE: &str = "state";
pub(super) const KIND: &str = "kind";
pub(super) const ROLE: &str = "role";
pub(super) const REV: &str = "rev";
pub(super) const SEQ: &str = "seq";
pub(super) const STEP: &str = "step";
pub(super) const GENERATION: &str = "generation";
pub(super) const CONSENT_VERSION: &str = "consent_version";
pub(super) const CONSENT_RECEIPT: &str = "consent_receipt";
/// On a membership: `"1"` when the room owner granted the member action authority.
pub(super) const ACTION_AUTHORITY: &str = "action_authority";
pub(super) const CLAIM_TOKEN: &str = "claim_token";
pub(super) const REQUEST_HASH: &str = "request_hash";
pub(super) const LEASE_UNTIL: &str = "lease_until";
pub(super) const MUTATION_SHA256: &str = "mutation_sha256";

// Timestamps.
pub(super) const CREATED_AT: &str = "created_at";
pub(super) const CREATED_BY: &str = "created_by";
pub(super) const UPDATED_AT: &str = "updated_at";
/// A person's name as their sign-in provider gives it (an account's profile).
pub(super) const DISPLAY_NAME: &str = "display_name";
pub(super) const REVOKED_AT: &str = "revoked_at";
pub(super) const ACCEPTED_AT: &str = "accepted_at";
pub(super) const REFRESHED_AT: &str = "refreshed_at";
pub(super) const ABSOLUTE_UNTIL: &str = "absolute_until";

// Accounts, agent bindings, sessions and intents.
pub(super) const ISSUER: &str = "issuer";
pub(super) const PROVIDER: &str = "provider";
pub(super) const TENANT_REF: &str = "tenant_ref";
pub(super) const ROOMS_LOCKED: &str = "rooms_locked";
pub(super) const DEVELOPER: &str = "developer";
pub(super) const GUEST: &str = "guest";
pub(super) const DENIED_CAPABILITIES: &str = "denied_capabilities";
pub(super) const BROWSER_HASH: &str = "browser_hash";
pub(super) const PURPOSE: &str = "purpose";
pub(super) const SESSION_HASH: &str = "session_hash";
pub(super) const RETURN_TO: &str = "return_to";

// Sources, their credential, admission, reports and probes.
pub(super) const ADAPTER_PROFILE: &str = "adapter_profile";
pub(super) const ADAPTER_VERSION: &str = "adapter_version";
pub(super) const ADAPTER_HASH: &str = "adapter_hash";
pub(super) const MANIFEST_HASH: &str = "manifest_hash";
pub(super) const LABEL: &str = "label";
pub(super) const BEARER_HASH: &str = "bearer_hash";
pub(super) const DELIVERY_HASH: &str = "delivery_hash";
pub(super) const CREDENTIAL_EXPIRES_AT: &str = "credential_expires_at";
pub(super) const CREDENTIALED_AT: &str = "credentialed_at";
pub(super) const ADMITTED: &str = "admitted";
pub(super) const PRODUCER_EPOCH: &str = "producer_epoch";
pub(super) const REGISTERED_AT: &str = "registered_at";
pub(super) const LAST_OBSERVED_AT_MS: &str = "last_observed_at_ms";
pub(super) const LAST_RECEIVED_AT: &str = "last_received_at";
pub(super) const CAPABILITY: &str = "capability";
pub(super) const REQUESTED_AT_MS: &str = "requested_at_ms";
pub(super) const ANSWER_UNTIL_MS: &str = "answer_until_ms";

// Player embodiment: the guards of an environment binding.
pub(super) const CONNECTOR_EPOCH: &str = "connector_epoch";
pub(super) const ESTOP_ACTIVE: &str = "estop_active";

/// A string attribute, empty when absent.
pub(super) fn text(item: &Item, name: &str) -> String {
    item.s(name).unwrap_or_default().to_owned()
}

/// A string attribute, if present.
pub(super) fn opt(item: &Item, name: &str) -> Option<String> {
    item.s(name).map(str::to_owned)
}

/// Sets a string attribute only when there is a value: absent stays absent.
pub(super) fn set_s(item: &mut Item, name: &str, v: Option<&str>) {
    if let Some(v) = v {
        item.attrs.insert(name.to_owned(), Attr::S(v.to_owned()));
    }
}

/// Sets a number attribute only when there is a value: absent stays absent.
pub(super) fn set_n(item: &mut Item, name: &str, v: Option<i64>) {
    if let Some(v) = v {
        item.attrs.insert(name.to_owned(), Attr::N(v));
    }
}

/// [`set_s`] for a builder chain.
pub(super) fn with_opt(mut item: Item, name: &str, v: Option<&str>) -> Item {
    set_s(&mut item, name, v);
    item
}
