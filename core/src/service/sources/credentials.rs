//! The browser credential lane (cookie): the one claim of a source's delivery, rotation
//! and revocation. A bearer exists only in the one response that shows it; the store
//! keeps its hash on the source and under the lookup ingress uses.
//! Must not depend on `http` or `mcp`.

use super::SourceService;
use super::{CREDENTIAL_TTL_SECS, DeveloperLane, RACE_RETRIES, developer};
use crate::domain::room::RoomId;
use crate::domain::source::*;
use crate::domain::time::{epoch_rfc3339, rfc3339};
use crate::error::ApiError;
use crate::service::records::sources::{
    BearerLookup, Delivery, SourceRecord, active_under, awaiting_claim_of, bearer_key, check_room_owner,
    consume_delivery, delivery_key, source_in_room, status_still,
};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::store::Cond;

/// A bearer being issued: the source update, its lookup and the one response.
struct Issued {
    source: SourceRecord,
    bearer_hash: String,
    lookup: BearerLookup,
    credential: SourceCredential,
}

impl Issued {
    /// The source put (guarded by `cond`), the new lookup, and the room check (owner, active).
    fn write(&self, tx: &mut Tx, cond: Cond) {
        tx.put(Role::Source, self.source.to_item(), cond);
        tx.put(Role::BearerLookup, self.lookup.to_item(&self.bearer_hash), Cond::NotExists);
        check_room_owner(tx, &self.source.room_id, &self.source.owner_account, false, None);
    }
}

impl SourceService {
    /// `POST /api/account/room-sources/credential-claims`: the signed-in developer room
    /// owner consumes the delivery once (conditional delete) and the source becomes
    /// credentialed with a fresh bearer, stored as its hash, in the same transaction.
    /// A reused, expired or foreign handle is one error, `claim_handle_invalid`.
    pub async fn claim_source_credential(
        &self,
        s: &Session,
        req: CredentialClaimRequest,
    ) -> Result<SourceCredential, ApiError> {
        s.require_member()?;
        developer(&self.config, &s.account_id, &s.policy, DeveloperLane::Browser)?;
        let handle = DeliveryHandle::parse(&req.claim_handle).ok_or(ApiError::ClaimHandleInvalid)?;
        let handle_hash = handle.hash();
        for _ in 0..RACE_RETRIES {
            let delivery = self.store.get(&delivery_key(&handle_hash)).await?.map(|d| Delivery::from_item(&d));
            // TTL deletion is lazy and the store's clock is not the service's: check it here.
            let delivery = delivery
                .filter(|d| d.expires_at > self.clock.epoch())
                .filter(|d| d.owner_account == s.account_id)
                .ok_or(ApiError::ClaimHandleInvalid)?;
            let got = source_in_room(self.store.as_ref(), &delivery.room_id, &delivery.source_id, &s.account_id, false)
                .await?;
            if !got.owner_holds {
                return Err(ApiError::ClaimHandleInvalid);
            }
            let source = got.source.ok_or(ApiError::ClaimHandleInvalid)?;
            if source.status != SourceStatus::AwaitingClaim || source.generation != delivery.generation {
                return Err(ApiError::ClaimHandleInvalid);
            }
            let issued = self.issue_bearer(&source, delivery.generation)?;
            let mut tx = Tx::new();
            consume_delivery(&mut tx, &handle_hash, &s.account_id);
            issued.write(&mut tx, awaiting_claim_of(delivery.generation));
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(issued.credential),
                Err(f) if f.failed(Role::Delivery) || f.failed(Role::Source) || f.failed(Role::Room) => {
                    return Err(ApiError::ClaimHandleInvalid);
                }
                Err(f) if f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::ClaimHandleInvalid)
    }

    /// `POST /api/account/room-sources/rotations`: a new bearer for an active source
    /// (shown once); the old one is refused from this moment, and the producer must
    /// register its manifest again.
    pub async fn rotate_source_credential(&self, s: &Session, req: SourceRef) -> Result<SourceCredential, ApiError> {
        s.require_member()?;
        developer(&self.config, &s.account_id, &s.policy, DeveloperLane::Browser)?;
        let source_id = SourceId::parse(&req.source_id).ok_or(ApiError::NotFound)?;
        for _ in 0..RACE_RETRIES {
            let source = self.owned_source(s, &req.room_id, source_id.as_str()).await?;
            let old = match (&source.status, &source.bearer_hash) {
                (SourceStatus::Active, Some(h)) => h.clone(),
                _ => return Err(ApiError::NotFound),
            };
            let issued = self.issue_bearer(&source, source.generation + 1)?;
            let mut tx = Tx::new();
            issued.write(&mut tx, active_under(&old));
            tx.delete(Role::BearerLookup, bearer_key(&old), None);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(issued.credential),
                Err(f) if f.failed(Role::Source) || f.contended() => continue,
                Err(f) if f.failed(Role::Room) => return Err(ApiError::NotFound),
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// `POST /api/account/room-sources/revocations`: permanent. The owner's cleanup path:
    /// it works under the room feature lock and without the developer flag.
    pub async fn revoke_source(&self, s: &Session, req: SourceRef) -> Result<SourceRevocation, ApiError> {
        s.require_member()?;
        let source_id = SourceId::parse(&req.source_id).ok_or(ApiError::NotFound)?;
        for _ in 0..RACE_RETRIES {
            let source = self.owned_source(s, &req.room_id, source_id.as_str()).await?;
            let revocation = |status| SourceRevocation {
                schema: SOURCE_REVOCATION_SCHEMA,
                source_id: source.source_id.clone(),
                status: SourceStatus::Revoked,
                revocation_status: status,
            };
            if source.status == SourceStatus::Revoked {
                return Ok(revocation("already_revoked"));
            }
            let mut tx = Tx::new();
            tx.put(Role::Source, source.revoked(rfc3339(self.clock.now())).to_item(), status_still(source.status));
            if let Some(h) = &source.bearer_hash {
                tx.delete(Role::BearerLookup, bearer_key(h), None);
            }
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => return Ok(revocation("revoked")),
                Err(f) if f.failed(Role::Source) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The session's own source in its own active room (others' are not found).
    async fn owned_source(&self, s: &Session, room_id: &str, source_id: &str) -> Result<SourceRecord, ApiError> {
        let room = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let got = source_in_room(self.store.as_ref(), room.as_str(), source_id, &s.account_id, false).await?;
        if !got.owner_holds {
            return Err(ApiError::NotFound);
        }
        let source = got.source.ok_or(ApiError::NotFound)?;
        if source.owner_account != s.account_id {
            return Err(ApiError::NotFound);
        }
        Ok(source)
    }

    fn issue_bearer(&self, source: &SourceRecord, generation: u32) -> Result<Issued, ApiError> {
        let bearer = SourceBearer::generate();
        let now = self.clock.now();
        let expires = now.timestamp() + CREDENTIAL_TTL_SECS;
        // A new credential starts unadmitted: its producer registers its manifest again.
        let credentialed = source.credentialed(bearer.hash(), generation, expires, rfc3339(now));
        let lookup = BearerLookup {
            room_id: source.room_id.clone(),
            source_id: source.source_id.clone(),
            owner_account: source.owner_account.clone(),
            generation,
        };
        let credential = SourceCredential {
            schema: SOURCE_CREDENTIAL_SCHEMA,
            source_id: source.source_id.clone(),
            room_id: source.room_id.clone(),
            source_bearer: bearer.expose().to_owned(),
            plugin_config: self.plugin_config(source)?,
            credential_generation: generation,
            shown_once: true,
            expires_at: epoch_rfc3339(expires),
            action_credential: false,
        };
        Ok(Issued { source: credentialed, bearer_hash: bearer.hash(), lookup, credential })
    }
}
