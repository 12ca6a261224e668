//! A replayed source create delivers again: the agent whose create response was lost gets
//! a usable delivery. While the credential is unclaimed, a fresh handle replaces the one
//! answered before, in one transaction (the old handle is refused from that commit on; the
//! store keeps only hashes); once claimed, the replay says the delivery is used. Must not
//! depend on `http` or `mcp`.

use serde_json::Value;

use super::{CLAIM_PAGE_PATH, DELIVERY_TTL_SECS, RACE_RETRIES, SourceService};
use crate::domain::source::{CredentialDelivery, DeliveryHandle, DeliveryStatus, SourceStatus};
use crate::domain::time::epoch_rfc3339;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::sources::{Delivery, SourceRecord, check_room_owner, replace_delivery, source_key};
use crate::service::records::{Role, Tx};
use crate::service::rooms::room_tenant;

impl SourceService {
    /// The delivery a replay of the create whose stored answer is `stored` answers: a
    /// fresh handle (`pending`) while the source awaits its claim and its room is still the
    /// caller's (active, of its tenant, owned by it as owner member); `claimed` once the
    /// credential was claimed; else `unavailable`. Never the stored handle: there is none.
    pub(super) async fn delivered_again(&self, p: &Caller, stored: &Value) -> Result<CredentialDelivery, ApiError> {
        let stored_delivery = &stored["credential_delivery"];
        let answer = |status, handle: Option<String>, expires_at: Option<i64>| CredentialDelivery {
            claim_handle: handle,
            claim_url: format!("{}{CLAIM_PAGE_PATH}", self.config.public_base_url),
            expires_at: match expires_at {
                Some(at) => epoch_rfc3339(at),
                None => stored_delivery["expires_at"].as_str().unwrap_or_default().to_owned(),
            },
            status,
            bearer_included: false,
            plugin_config_included: false,
        };
        let (Some(room_id), Some(source_id)) =
            (stored["source"]["room_id"].as_str(), stored["source"]["source_id"].as_str())
        else {
            return Ok(answer(DeliveryStatus::Unavailable, None, None));
        };
        for _ in 0..RACE_RETRIES {
            let Some(item) = self.store.get(&source_key(room_id, source_id)).await? else {
                return Ok(answer(DeliveryStatus::Unavailable, None, None));
            };
            let source = SourceRecord::from_item(&item);
            if source.owner_account != p.account_id {
                return Ok(answer(DeliveryStatus::Unavailable, None, None));
            }
            if source.credentialed_at.is_some() {
                return Ok(answer(DeliveryStatus::Claimed, None, None));
            }
            let (SourceStatus::AwaitingClaim, Some(old_hash)) = (source.status, source.delivery_hash.as_deref()) else {
                return Ok(answer(DeliveryStatus::Unavailable, None, None));
            };
            let handle = DeliveryHandle::generate();
            let expires_at = self.clock.epoch() + DELIVERY_TTL_SECS;
            let delivery = Delivery {
                room_id: source.room_id.clone(),
                source_id: source.source_id.clone(),
                owner_account: p.account_id.clone(),
                generation: source.generation,
                expires_at,
            };
            let mut tx = Tx::new();
            replace_delivery(&mut tx, &source, old_hash, &delivery, &handle.hash());
            check_room_owner(&mut tx, room_id, &p.account_id, true, Some(&room_tenant(p)));
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => {
                    let handle = handle.expose().to_owned();
                    return Ok(answer(DeliveryStatus::Pending, Some(handle), Some(expires_at)));
                }
                Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => {
                    return Ok(answer(DeliveryStatus::Unavailable, None, None));
                }
                // Claimed (or delivered again by a concurrent replay) in between: read again.
                Err(f) if f.failed(Role::Source) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::IdempotencyInProgress)
    }
}
