//! Rooms, memberships, consent receipts, the account's listing entries and invites, as
//! stored. Must not depend on the use cases above the kernel.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::*;
use crate::domain::hash_parts;
use crate::domain::room::RoomRole;
use crate::error::ApiError;
use crate::service::records::BODY;
use crate::service::records::accounts::ACCOUNT_PREFIX;
use crate::store::{EXPIRES_AT, Item, Key};

// ---------- rooms, memberships, consent receipts, listing entries ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomStatus {
    Active,
    Closed,
}

/// The room item: its body, with the owner, status and consent version also as
/// attributes (conditions and the source lane read those), and the owner's tenant as an
/// attribute only (none on a room stored before tenants were recorded; see [`super::tenant`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomRecord {
    pub room_id: String,
    pub name: String,
    pub description: Option<String>,
    pub owner_account: String,
    pub status: RoomStatus,
    pub consent_version: u32,
    pub created_at: DateTime<Utc>,
    #[serde(default = "version::first", skip_serializing_if = "version::is_first")]
    pub schema_version: u32,
    /// The owner tuple's tenant reference: the `tenant_ref` attribute, never in the body.
    #[serde(skip)]
    pub tenant_ref: Option<String>,
}

impl RoomRecord {
    pub fn is_active(&self) -> bool {
        self.status == RoomStatus::Active
    }

    pub fn to_item(&self) -> Result<Item, ApiError> {
        let k = room_key(&self.room_id);
        let item = Item::new(k.pk, k.sk)
            .with_s(OWNER_ACCOUNT, &self.owner_account)
            .with_s(STATUS, tag(&self.status))
            .with_n(CONSENT_VERSION, self.consent_version as i64)
            .with_s(BODY, text(self)?);
        Ok(match &self.tenant_ref {
            Some(t) => item.with_s(TENANT_REF, t),
            None => item,
        })
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let room: Self = body(item, "room without body")?;
        Ok(RoomRecord { tenant_ref: item.s(TENANT_REF).map(str::to_owned), ..room })
    }
}

/// One account's membership of a room: its role and the consent version it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub room_id: String,
    pub account_id: String,
    pub role: RoomRole,
    /// 0 when none was ever recorded (never current).
    pub consent_version: u32,
    pub consent_receipt: String,
    pub accepted_at: String,
    /// Granted by the room owner (the `action_authority` attribute; absent on items
    /// written before it existed: no authority). The owner acts without it.
    pub action_authority: bool,
}

impl Membership {
    /// The member may drive its player: the owner, or a member the owner granted it.
    pub fn may_act(&self) -> bool {
        self.role == RoomRole::Owner || self.action_authority
    }

    pub fn to_item(&self) -> Item {
        let k = member_key(&self.room_id, &self.account_id);
        let item = Item::new(k.pk, k.sk)
            .with_s(ROLE, tag(&self.role))
            .with_n(CONSENT_VERSION, self.consent_version as i64)
            .with_s(CONSENT_RECEIPT, &self.consent_receipt)
            .with_s(ACCEPTED_AT, &self.accepted_at);
        if self.action_authority { item.with_s(ACTION_AUTHORITY, "1") } else { item }
    }

    pub fn from_item(item: &Item) -> Self {
        Membership {
            room_id: item.pk.trim_start_matches(ROOM_PREFIX).to_owned(),
            account_id: item.sk.trim_start_matches(MEMBER_PREFIX).to_owned(),
            role: role_of(item),
            consent_version: item.n(CONSENT_VERSION).and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            consent_receipt: s_or_empty(item, CONSENT_RECEIPT),
            accepted_at: s_or_empty(item, ACCEPTED_AT),
            action_authority: item.s(ACTION_AUTHORITY) == Some("1"),
        }
    }
}

/// The durable receipt of one member's acceptance of one consent version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    pub room_id: String,
    pub account_id: String,
    pub version: u32,
    pub consent_receipt: String,
    pub accepted_at: String,
}

impl Consent {
    /// A member's acceptance of `version` at `accepted_at`, under its stable reference.
    pub fn accepted(room_id: &str, account_id: &str, version: u32, accepted_at: String) -> Self {
        Consent {
            room_id: room_id.to_owned(),
            account_id: account_id.to_owned(),
            version,
            consent_receipt: Self::receipt_ref(room_id, account_id, version),
            accepted_at,
        }
    }

    /// The opaque reference of a member's acceptance of a version (stable: the same
    /// acceptance always has the same reference).
    pub fn receipt_ref(room_id: &str, account_id: &str, version: u32) -> String {
        format!("consent_{}", &hash_parts(&["room-consent.v1", room_id, account_id, &version.to_string()])[..24])
    }

    pub fn to_item(&self) -> Item {
        let k = consent_key(&self.room_id, &self.account_id, self.version);
        Item::new(k.pk, k.sk).with_s(CONSENT_RECEIPT, &self.consent_receipt).with_s(ACCEPTED_AT, &self.accepted_at)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let rest = item.sk.strip_prefix(CONSENT_PREFIX).ok_or_else(|| broken("not a consent receipt"))?;
        let (account_id, version) = rest.rsplit_once('#').ok_or_else(|| broken("not a consent receipt"))?;
        Ok(Consent {
            room_id: item.pk.trim_start_matches(ROOM_PREFIX).to_owned(),
            account_id: account_id.to_owned(),
            version: version.parse().map_err(|_| broken("not a consent receipt"))?,
            consent_receipt: s_or_empty(item, CONSENT_RECEIPT),
            accepted_at: s_or_empty(item, ACCEPTED_AT),
        })
    }
}

/// The listing entry of a room under an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRoom {
    pub account_id: String,
    pub room_id: String,
}

impl AccountRoom {
    pub fn to_item(&self) -> Item {
        let k = account_room_key(&self.account_id, &self.room_id);
        Item::new(k.pk, k.sk).with_s(ROOM_ID, &self.room_id)
    }

    pub fn from_item(item: &Item) -> Option<Self> {
        Some(AccountRoom {
            account_id: item.pk.trim_start_matches(ACCOUNT_PREFIX).to_owned(),
            room_id: item.s(ROOM_ID)?.to_owned(),
        })
    }
}

/// An invite: which room, who issued it, until when (TTL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub code_hash: String,
    pub room_id: String,
    pub created_by: String,
    pub expires_at: i64,
}

impl Invite {
    pub fn key(&self) -> Key {
        invite_key(&self.code_hash)
    }

    pub fn to_item(&self) -> Item {
        let k = self.key();
        Item::new(k.pk, k.sk)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(CREATED_BY, &self.created_by)
            .with_n(EXPIRES_AT, self.expires_at)
    }

    pub fn from_item(item: &Item) -> Option<Self> {
        Some(Invite {
            code_hash: item.pk.trim_start_matches(INVITE_PREFIX).to_owned(),
            room_id: item.s(ROOM_ID)?.to_owned(),
            created_by: s_or_empty(item, CREATED_BY),
            expires_at: item.n(EXPIRES_AT).unwrap_or(i64::MAX),
        })
    }
}
