//! The storage kernel: the only code that knows the table. Key design, item shapes
//! and (de)serialisation, named queries, the transaction builder (actions carry a
//! [`Role`]; a refusal names it) and the idempotent commit every create uses.
//! Use cases above it speak records and roles, never attribute names or positions.
//! One module per feature's items (`runs`, `receipts`, `accounts`, `sessions`, `rooms`,
//! `sources`, `observations`, `probes`, `bound_room`); every attribute name is spelled
//! once, in `attrs`, and every key shape once, by its kind's key function; the one rule
//! for body versions is `version`. The names other features use are re-exported here.
//! Must not depend on `http` or `mcp`.

pub mod accounts;
mod attrs;
pub mod bound_room;
pub mod idempotent;
pub mod layout;
pub mod limits;
pub mod observations;
pub mod probes;
pub mod receipts;
pub mod rooms;
pub mod runs;
pub mod sessions;
pub mod sources;
pub mod tx;
pub mod version;

pub use accounts::{BINDING_ENTRY_PREFIX, account_key, binding_entry_key, binding_key, link_key};
pub use idempotent::{Committed, Completion, answer_from_receipt, commit_once};
pub use receipts::{RECEIPT_TTL_SECS, Receipt, ReceiptState, receipt_key};
pub use runs::{event_from_item, event_item, event_sk, run_from_item, run_item, run_key, run_unchanged};
pub use sessions::{intent_key, session_key};
pub use tx::{Role, Tx, TxFailure};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The attribute holding an item's JSON body (runs, events, completed receipts, ...).
pub const BODY: &str = "body";

/// The stored string of a unit enum (its serde name: `active`, `run_room`, ...).
fn enum_text<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => unreachable!("stored statuses serialize as strings"),
    }
}

/// The unit enum a stored string names, if any.
fn enum_parse<T: DeserializeOwned>(s: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}
