//! The agent facade of sources (bearer): create a read-only source with its deferred
//! credential delivery, and the owner's bounded listing. Must not depend on `http` or `mcp`.

use serde_json::Value;

use super::SourceService;
use super::{CLAIM_PAGE_PATH, DELIVERY_TTL_SECS, DeveloperLane, MAX_LISTED_SOURCES, developer};
use crate::domain::hash_parts;
use crate::domain::ids::IdempotencyKey;
use crate::domain::page::{self, PagedList};
use crate::domain::room::{FalseFlags, RoomId, redact};
use crate::domain::scopes::ROOM_SOURCES_MANAGE;
use crate::domain::source::*;
use crate::domain::time::{epoch_rfc3339, rfc3339};
use crate::error::ApiError;
use crate::service::records::sources::{Delivery, SourceRecord, check_room_owner, room_owned_by, sources_page};
use crate::service::records::{Committed, Completion, Role, Tx, commit_once, receipt_key};
use crate::service::rooms::room_tenant;
use crate::service::{Caller, Mutation};

const OP_CREATE: &str = "room_source.create";

impl SourceRecord {
    /// `helix.room_source.v1`: what the owner sees of a source (never a credential).
    pub fn view(&self) -> SourceView {
        SourceView {
            schema: SOURCE_SCHEMA,
            source_id: self.source_id.clone(),
            room_id: self.room_id.clone(),
            adapter_profile: self.adapter_profile.clone(),
            world_id: self.world_id.clone(),
            label: self.label.clone(),
            status: self.status,
            credentialed: self.status == SourceStatus::Active && self.bearer_hash.is_some(),
            credential_generation: self.generation,
            manifest: ManifestState {
                admitted: self.is_admitted(),
                adapter_version: self.adapter_version.clone(),
                producer_epoch: self.producer_epoch,
                registered_at: self.registered_at.clone(),
            },
            read_only: true,
            execution_enabled: false,
            created_at: self.created_at.clone(),
            flags: FalseFlags::default(),
        }
    }
}

impl SourceService {
    pub(super) fn plugin_config(&self, s: &SourceRecord) -> Result<PluginConfig, ApiError> {
        let profile =
            adapter(&s.adapter_profile).ok_or_else(|| ApiError::internal(std::io::Error::other("unknown profile")))?;
        Ok(PluginConfig::new(&self.config.public_base_url, &s.source_id, &s.room_id, &s.world_id, profile))
    }

    /// `POST /api/v1/rooms/{room_id}/sources`: the room owner (a developer account)
    /// creates a read-only source and its deferred credential delivery in one
    /// transaction. The stored receipt holds the delivery without its handle (the
    /// store keeps only the handle's hash); a replay delivers again
    /// ([`SourceService::delivered_again`]): a fresh handle while the credential is
    /// unclaimed, else where the delivery stands.
    pub async fn create_source(
        &self,
        p: &Caller,
        room_id: &str,
        key: &IdempotencyKey,
        req: CreateSourceRequest,
    ) -> Result<Mutation<SourceCreated>, ApiError> {
        // In production the developer scope is part of what the operation needs: a refusal names both.
        let production = self.config.mode == crate::config::Mode::Production;
        p.require_all(&[ROOM_SOURCES_MANAGE], if production { &[crate::domain::scopes::DEVELOPER] } else { &[] })?;
        developer(&self.config, &p.account_id, &p.policy, DeveloperLane::Bearer(p))?;
        let profile = req.validate()?;
        // Ownership is checked inside the transaction (room active, of the caller's tenant and
        // owned by the caller, the caller its owner member), not by a read before it: one
        // round trip less.
        let room = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let body = serde_json::to_value(&req).map_err(ApiError::internal)?;
        let hash =
            hash_parts(&["room_source.request.v1", &p.owner_hash(), OP_CREATE, room.as_str(), &body.to_string()]);
        let rkey = receipt_key(&p.identity_hash(), OP_CREATE, key.as_str());
        let now = self.clock.now();
        let handle = DeliveryHandle::generate();
        let expires = now.timestamp() + DELIVERY_TTL_SECS;
        let source = SourceRecord {
            source_id: SourceId::generate().as_str().to_owned(),
            room_id: room.as_str().to_owned(),
            owner_account: p.account_id.clone(),
            adapter_profile: profile.id.to_owned(),
            world_id: req.world_id.clone(),
            label: req.label.as_ref().map(|l| l.trim()).filter(|l| !l.is_empty()).map(str::to_owned),
            status: SourceStatus::AwaitingClaim,
            generation: 1,
            created_at: rfc3339(now),
            bearer_hash: None,
            delivery_hash: Some(handle.hash()),
            credential_expires_at: None,
            credentialed_at: None,
            admitted: None,
            adapter_version: None,
            adapter_hash: None,
            manifest_hash: None,
            producer_epoch: None,
            registered_at: None,
            revoked_at: None,
        };
        let delivery = Delivery {
            room_id: source.room_id.clone(),
            source_id: source.source_id.clone(),
            owner_account: p.account_id.clone(),
            generation: 1,
            expires_at: expires,
        };
        let created = SourceCreated {
            schema: SOURCE_CREATED_SCHEMA,
            source: source.view(),
            credential_delivery: CredentialDelivery {
                claim_handle: None,
                claim_url: format!("{}{CLAIM_PAGE_PATH}", self.config.public_base_url),
                expires_at: epoch_rfc3339(expires),
                status: DeliveryStatus::Pending,
                bearer_included: false,
                plugin_config_included: false,
            },
            flags: FalseFlags::default(),
        };
        // The delivery is built here from server values only; redaction would take its
        // `bearer_included` key for a credential name, so it is set after projection.
        let mut stored = redact(serde_json::to_value(&created).map_err(ApiError::internal)?);
        stored["credential_delivery"] =
            serde_json::to_value(&created.credential_delivery).map_err(ApiError::internal)?;
        let mut tx = Tx::new();
        tx.put(Role::Source, source.to_item(), crate::store::Cond::NotExists);
        tx.put(Role::Delivery, delivery.to_item(&handle.hash()), crate::store::Cond::NotExists);
        check_room_owner(&mut tx, room.as_str(), &p.account_id, true, Some(&room_tenant(p)));
        let done = Completion {
            receipt_key: &rkey,
            request_hash: &hash,
            status: 201,
            response: &stored,
            run_id: None,
            expires_at: self.receipt_expiry(),
        };
        match commit_once(self.store.as_ref(), self.clock.epoch(), done, tx).await? {
            Committed::Answered(mut m) => {
                if m.replayed {
                    let delivery = self.delivered_again(p, &m.body).await?;
                    m.body["credential_delivery"] = serde_json::to_value(&delivery).map_err(ApiError::internal)?;
                } else {
                    // The handle is the one intentional exception to redaction: it is added
                    // after projection, to this response only.
                    m.body["credential_delivery"]["claim_handle"] = Value::String(handle.expose().to_owned());
                }
                Ok(m)
            }
            Committed::Refused(f) if f.failed(Role::Room) || f.failed(Role::Member) => Err(ApiError::NotFound),
            Committed::Refused(_) => Err(ApiError::internal(std::io::Error::other("source id collision"))),
        }
    }

    /// `GET /api/v1/rooms/{room_id}/sources`: the owner's bounded listing, no credentials
    /// (the edge serializes it through [`SourceList::projected`]): one page, after the `cursor` of the previous page when given (a cursor of another
    /// room's list is refused).
    pub async fn list_sources(&self, p: &Caller, room_id: &str, cursor: Option<&str>) -> Result<SourceList, ApiError> {
        p.require(&[ROOM_SOURCES_MANAGE])?;
        if p.policy.rooms_locked {
            return Err(ApiError::RoomFeatureLocked);
        }
        let room = self.source_room(room_id, p).await?;
        let valid = |a: &str| !a.is_empty();
        let after = page::decode_opt(cursor, PagedList::Sources, &p.account_id, Some(room.as_str()), valid)?;
        let after = after.map(|c| c.after);
        let (sources, has_more) =
            sources_page(self.store.as_ref(), room.as_str(), after.as_deref(), MAX_LISTED_SOURCES).await?;
        let next_cursor = sources
            .last()
            .filter(|_| has_more)
            .map(|last| page::encode(PagedList::Sources, &p.account_id, Some(room.as_str()), &last.source_id));
        Ok(SourceList {
            schema: SOURCE_LIST_SCHEMA,
            room_id: room.to_string(),
            sources: sources.iter().map(SourceRecord::view).collect(),
            has_more,
            next_cursor,
            flags: FalseFlags::default(),
        })
    }

    /// The room (active, of the caller's tenant, owned by the caller) and the owner's
    /// membership, or not found.
    async fn source_room(&self, room_id: &str, p: &Caller) -> Result<RoomId, ApiError> {
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        if !room_owned_by(self.store.as_ref(), id.as_str(), &p.account_id, &room_tenant(p)).await? {
            return Err(ApiError::NotFound);
        }
        Ok(id)
    }
}
