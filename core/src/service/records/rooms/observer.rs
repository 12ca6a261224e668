//! Observers of a browser chat, their one-time claim items and chat snapshots, as
//! stored. Must not depend on the use cases above the kernel.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::*;
use crate::domain::room::SnapshotMessage;
use crate::error::ApiError;
use crate::service::records::BODY;
use crate::store::{EXPIRES_AT, Item};

// ---------- observers, claims and snapshots ----------

/// The stored states of an observer (expiry and revocation are read, not stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObserverState {
    AwaitingClaim,
    Bound,
    Disconnected,
}

/// The stored observer record (its claim item carries a copy until consumed), with the
/// tenant of the browser session that created it as an attribute only (none on an observer
/// stored before observers recorded their tenant: such an observer is read by no one, see
/// [`super::tenant`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObserverRecord {
    pub observer_ref: String,
    pub account_id: String,
    pub chat_hash: String,
    pub claim_hash: String,
    pub status: ObserverState,
    pub binding_ref: Option<String>,
    pub run_id: Option<String>,
    pub snapshot_ref: Option<String>,
    pub snapshot_message_count: u32,
    pub snapshot_char_count: u32,
    pub created_at: DateTime<Utc>,
    pub claim_expires_at: i64,
    #[serde(default = "version::first", skip_serializing_if = "version::is_first")]
    pub schema_version: u32,
    /// The creating session's tenant reference: the `tenant_ref` attribute, never in the body.
    #[serde(skip)]
    pub tenant_ref: Option<String>,
}

impl ObserverRecord {
    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = observer_key(&self.observer_ref);
        let item = Item::new(k.pk, k.sk)
            .with_s(STATUS, tag(&self.status))
            .with_s(ACCOUNT_ID, &self.account_id)
            .with_s(BODY, text(self)?);
        Ok(match &self.tenant_ref {
            Some(t) => item.with_s(TENANT_REF, t),
            None => item,
        })
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let observer: Self = body(item, "observer without body")?;
        Ok(ObserverRecord { tenant_ref: item.s(TENANT_REF).map(str::to_owned), ..observer })
    }
}

/// The claim item of an unclaimed observer: its account, the tenant of the session that
/// issued it (an attribute only; none on a claim stored before tenants were recorded), and
/// a copy of the observer.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub observer: ObserverRecord,
    pub expires_at: i64,
    pub tenant_ref: Option<String>,
}

impl Claim {
    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = claim_key(&self.observer.claim_hash);
        let item = Item::new(k.pk, k.sk)
            .with_s(ACCOUNT_ID, &self.observer.account_id)
            .with_s(OBSERVER_REF, &self.observer.observer_ref)
            .with_s(BODY, text(&self.observer)?)
            .with_n(EXPIRES_AT, self.expires_at);
        Ok(match &self.tenant_ref {
            Some(t) => item.with_s(TENANT_REF, t),
            None => item,
        })
    }

    /// The account the claim was issued to, from the attribute its delete is guarded on.
    pub fn account_of(item: &Item) -> Option<&str> {
        item.s(ACCOUNT_ID)
    }

    /// The claim, its copy of the observer carrying the claim's tenant (the observer's:
    /// both are written from the one issuing session).
    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let tenant_ref = item.s(TENANT_REF).map(str::to_owned);
        let observer: ObserverRecord = body(item, "claim without body")?;
        Ok(Claim {
            observer: ObserverRecord { tenant_ref: tenant_ref.clone(), ..observer },
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
            tenant_ref,
        })
    }
}

/// The redacted chat snapshot kept with an observer (its body is the message array).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub observer_ref: String,
    pub messages: Vec<SnapshotMessage>,
}

impl Snapshot {
    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = snapshot_key(&self.observer_ref);
        Ok(Item::new(k.pk, k.sk).with_s(BODY, text(&self.messages)?))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        Ok(Snapshot {
            observer_ref: item.pk.trim_start_matches(OBSERVER_PREFIX).to_owned(),
            messages: body(item, "snapshot without body")?,
        })
    }
}
