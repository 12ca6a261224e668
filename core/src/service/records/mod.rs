//! The storage kernel: the only code that knows the table. Key design, item shapes
//! and (de)serialisation, named queries, the transaction builder (actions carry a
//! [`Role`]; a refusal names it) and the idempotent commit every create uses.
//! Use cases above it speak records and roles, never attribute names or positions.
//! One module per feature's items (`runs`, `receipts`, `accounts`, `sessions`, `rooms`,
//! `sources`, `observations`, `probes`, `bound_room`, `approvals`); every attribute name is spelled
//! once, in `attrs`, and every key shape once, by its kind's key function; the one rule
//! for body versions is `version`. The names other features use are re-exported here.
//! Must not depend on `http` or `mcp`.

pub mod accounts;
pub mod approvals;
mod attrs;
pub mod bound_room;
pub mod embodiment;
pub mod idempotent;
pub mod layout;
pub mod limits;
pub mod oauth_clients;
pub mod oauth_grants;
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
pub use idempotent::{Committed, Completion, StoredAnswer, answer_from_receipt, commit_once};
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// What only the kernel (and the store beneath it) may write: a key, or an attribute
    /// named by a literal.
    const TABLE_KNOWLEDGE: [&str; 9] =
        ["Key::new(", "with_s(\"", "with_n(\"", "eq_s(\"", "eq_n(\"", ".s(\"", ".n(\"", "Cond::Missing(", "Cond::Lt("];

    fn sources_under(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources_under(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_key_or_attribute_name_is_spelled_outside_the_kernel_and_the_store() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let allowed = [src.join("store"), src.join("service").join("records")];
        let mut files = vec![];
        sources_under(&src, &mut files);
        let mut found = vec![];
        for file in files.iter().filter(|f| !allowed.iter().any(|a| f.starts_with(a))) {
            let text = std::fs::read_to_string(file).unwrap();
            for (n, line) in text.lines().enumerate() {
                for pattern in TABLE_KNOWLEDGE.iter().filter(|p| line.contains(**p)) {
                    found.push(format!("{}:{}: {pattern}", file.strip_prefix(&src).unwrap().display(), n + 1));
                }
            }
        }
        assert!(files.len() > 50, "the scan reads the source tree");
        assert!(found.is_empty(), "table knowledge outside the storage kernel:\n{}", found.join("\n"));
    }
}
