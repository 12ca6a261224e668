//! The storage kernel: the only code that knows the table. Key design, item shapes
//! and (de)serialisation, named queries, the transaction builder (actions carry a
//! [`Role`]; a refusal names it) and the idempotent commit every create uses.
//! Use cases above it speak records and roles, never attribute names or positions.

pub mod idempotent;
pub mod layout;
pub mod rooms;
pub mod tx;

pub use idempotent::{Committed, Completion, answer_from_receipt, commit_once};
pub use tx::{Role, Tx, TxFailure};

use crate::domain::event::Event;
use crate::domain::hash_parts;
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::store::{Cond, EXPIRES_AT, Item, Key};

pub const BODY: &str = "body";
pub const REV: &str = "rev";

pub fn run_key(run_id: &str) -> Key {
    Key::new(format!("RUN#{run_id}"), "RUN")
}

pub fn event_sk(seq: u64) -> String {
    format!("EVT#{seq:020}")
}

pub fn run_item(run: &Run) -> Result<Item, ApiError> {
    let key = run_key(&run.run_id);
    Ok(Item::new(key.pk, key.sk)
        .with_n(REV, run.rev as i64)
        .with_s("owner_hash", &run.owner_hash)
        .with_s(BODY, serde_json::to_string(run).map_err(ApiError::internal)?))
}

pub fn run_from_item(item: &Item) -> Result<Run, ApiError> {
    serde_json::from_str(item.s(BODY).unwrap_or_default()).map_err(ApiError::internal)
}

/// The condition guarding every run write: nobody wrote since we read `rev`.
pub fn run_unchanged(rev: u64) -> Cond {
    Cond::eq_n(REV, rev as i64)
}

pub fn event_item(e: &Event) -> Result<Item, ApiError> {
    Ok(Item::new(format!("RUN#{}", e.run_id), event_sk(e.seq))
        .with_n("seq", e.seq as i64)
        .with_s(BODY, serde_json::to_string(e).map_err(ApiError::internal)?))
}

pub fn event_from_item(item: &Item) -> Result<Event, ApiError> {
    serde_json::from_str(item.s(BODY).unwrap_or_default()).map_err(ApiError::internal)
}

/// A receipt is keyed by the token identity (issuer, tenant, provider, subject), which the
/// transport knows before the principal read; see `runs::request_hash` for the owner.
pub fn receipt_key(identity_hash: &str, operation: &str, idempotency_key: &str) -> Key {
    Key::new(format!("IDEM#{}", hash_parts(&["idem.v1", identity_hash, operation, idempotency_key])), "IDEM")
}

pub fn link_key(provider: &str, subject: &str) -> Key {
    Key::new(format!("LINK#{}", hash_parts(&["link.v1", provider, subject])), "LINK")
}

pub fn binding_key(binding_hash: &str) -> Key {
    Key::new(format!("AGENTBIND#{binding_hash}"), "AGENTBIND")
}

/// The account item: status and the operator-held policy.
pub fn account_key(account_id: &str) -> Key {
    Key::new(format!("ACCOUNT#{account_id}"), "ACCOUNT")
}

/// Prefix of the account's binding entries (one per agent binding, for listing).
pub const BINDING_ENTRY_PREFIX: &str = "AGENTBIND#";

/// The listing entry of an agent binding under its account, written in the same
/// transaction as the binding item itself.
pub fn binding_entry_key(account_id: &str, binding_hash: &str) -> Key {
    Key::new(format!("ACCOUNT#{account_id}"), format!("{BINDING_ENTRY_PREFIX}{binding_hash}"))
}

/// A browser session, by the hash of its token.
pub fn session_key(token_hash: &str) -> Key {
    Key::new(format!("SESSION#{token_hash}"), "SESSION")
}

/// A sign-in intent, by the hash of its state.
pub fn intent_key(state_hash: &str) -> Key {
    Key::new(format!("INTENT#{state_hash}"), "INTENT")
}

/// An idempotency receipt: a reservation (in progress, with a lease) or a completed
/// response kept for 24 hours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub request_hash: String,
    pub state: ReceiptState,
    pub run_id: Option<String>,
    pub lease_until: i64,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptState {
    InProgress { claim_token: String },
    Completed { status: u16, body: String },
}

pub const RECEIPT_TTL_SECS: i64 = 24 * 3600;

impl Receipt {
    pub fn to_item(&self, key: &Key) -> Item {
        let mut item = Item::new(key.pk.clone(), key.sk.clone())
            .with_s("request_hash", &self.request_hash)
            .with_n("lease_until", self.lease_until)
            .with_n(EXPIRES_AT, self.expires_at);
        if let Some(id) = &self.run_id {
            item = item.with_s("run_id", id);
        }
        match &self.state {
            ReceiptState::InProgress { claim_token } => {
                item.with_s("state", "in_progress").with_s("claim_token", claim_token)
            }
            ReceiptState::Completed { status, body } => {
                item.with_s("state", "completed").with_n("status", *status as i64).with_s(BODY, body)
            }
        }
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let broken = || ApiError::internal(std::io::Error::other("malformed idempotency receipt"));
        let state = match item.s("state") {
            Some("in_progress") => {
                ReceiptState::InProgress { claim_token: item.s("claim_token").ok_or_else(broken)?.to_owned() }
            }
            Some("completed") => ReceiptState::Completed {
                status: item.n("status").ok_or_else(broken)? as u16,
                body: item.s(BODY).ok_or_else(broken)?.to_owned(),
            },
            _ => return Err(broken()),
        };
        Ok(Receipt {
            request_hash: item.s("request_hash").ok_or_else(broken)?.to_owned(),
            state,
            run_id: item.s("run_id").map(str::to_owned),
            lease_until: item.n("lease_until").unwrap_or(0),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        })
    }
}
