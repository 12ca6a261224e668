//! Accounts, links and agent bindings as stored: the keys here, one file per kind for
//! its typed record (statuses as serde enums with the stored strings) and the
//! conditions that guard its writes (`account`, `link`, `binding`, which also lists an
//! account's bindings). Knows no use case.

mod account;
mod binding;
mod link;
mod profile;

pub use account::{AccountRecord, AccountStatus, policy_of};
pub use binding::{
    BindingEntry, BindingRecord, BindingStatus, binding_without_generation, bindings_of_account, entry_free_or_revoked,
    entry_is_revoked,
};
pub use link::{LinkRecord, LinkStatus, link_is_active};
pub use profile::{MAX_DISPLAY_NAME_CHARS, clean_display_name, display_names, profile_item, profile_key};

use crate::domain::hash_parts;
use crate::store::Key;

pub fn link_key(provider: &str, subject: &str) -> Key {
    Key::new(format!("LINK#{}", hash_parts(&["link.v1", provider, subject])), "LINK")
}

/// The partition of an agent binding, and the sort key prefix of its listing entry.
const AGENT_BINDING_PREFIX: &str = "AGENTBIND#";

pub fn binding_key(binding_hash: &str) -> Key {
    Key::new(format!("{AGENT_BINDING_PREFIX}{binding_hash}"), "AGENTBIND")
}

/// The partition of an account: its item and its listing entries (bindings, rooms).
pub(super) const ACCOUNT_PREFIX: &str = "ACCOUNT#";

/// The account item: status and the operator-held policy.
pub fn account_key(account_id: &str) -> Key {
    Key::new(format!("{ACCOUNT_PREFIX}{account_id}"), "ACCOUNT")
}

/// Prefix of the account's binding entries (one per agent binding, for listing).
pub const BINDING_ENTRY_PREFIX: &str = AGENT_BINDING_PREFIX;

/// The listing entry of an agent binding under its account, written in the same
/// transaction as the binding item itself.
pub fn binding_entry_key(account_id: &str, binding_hash: &str) -> Key {
    Key::new(account_key(account_id).pk, format!("{BINDING_ENTRY_PREFIX}{binding_hash}"))
}
