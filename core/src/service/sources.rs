//! Room sources: read-only source bindings of a room (create, list), the deferred
//! credential delivery and its one browser claim, rotation and revocation, and the
//! producer ingress (source-bearer authentication, manifest admission, observation
//! batches with TTL and exact provenance), plus the reads the run lane and Device Check
//! use. Secrets exist here only as hashes: the delivery handle keys its claim item and
//! the bearer keys its lookup item. Every credential check is repeated on every use.
//! Must not depend on `http` or `mcp`.

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;

use crate::domain::account::AccountPolicy;
use crate::domain::hash_parts;
use crate::domain::ids::IdempotencyKey;
use crate::domain::room::{FalseFlags, RoomId};
use crate::domain::scopes::ROOM_SOURCES_MANAGE;
use crate::domain::source::*;
use crate::error::ApiError;
use crate::store::{Attr, CancelReason, Cond, EXPIRES_AT, Item, Key, StoreError, WriteOp};

use super::accounts::policy_of;
use super::records::{BODY, Receipt, ReceiptState, account_key, receipt_key};
use super::rooms::{epoch_rfc3339, member_key, project, rfc3339, room_key};
use super::sessions::Session;
use super::{Caller, Mutation, Services};

const OP_CREATE: &str = "room_source.create";
/// How long a credential delivery handle stays claimable.
pub const DELIVERY_TTL_SECS: i64 = 900;
/// How long a claimed (or rotated) source bearer is valid.
pub const CREDENTIAL_TTL_SECS: i64 = 30 * 86_400;
/// How many sources one listing returns.
pub const MAX_LISTED_SOURCES: usize = 50;
/// The page the claim URL names.
pub const CLAIM_PAGE_PATH: &str = "/account/room-sources/claim";
const RACE_RETRIES: usize = 6;
/// Page size and page bound of a freshness-window read.
const WINDOW_PAGE: usize = 100;
/// Rooms whose sources Device Check reads at once.
const DEVICE_CHECK_ROOM_CONCURRENCY: usize = 8;
const MAX_WINDOW_PAGES: usize = 10;

// ---------- keys ----------

pub fn source_key(room_id: &str, source_id: &str) -> Key {
    Key::new(format!("ROOM#{room_id}"), format!("SRC#{source_id}"))
}
/// A delivery handle, by its hash (TTL; consumed by a conditional delete).
pub fn delivery_key(handle_hash: &str) -> Key {
    Key::new(format!("SRCCLAIM#{handle_hash}"), "CLAIM")
}
/// The current bearer of a source, by its hash: how ingress finds the source.
pub fn bearer_key(bearer_hash: &str) -> Key {
    Key::new(format!("SRCBEARER#{bearer_hash}"), "BEARER")
}
/// The partition of a source's observations.
pub fn observations_pk(source_id: &str) -> String {
    format!("SRCOBS#{source_id}")
}
/// The sort key of an observation: observed-at (ms, zero-padded) then request identity,
/// so a freshness window is one range query.
pub fn observation_sk(observed_at_ms: i64, request_id: &str) -> String {
    format!("OBS#{observed_at_ms:015}#{request_id}")
}
/// The last-report marker of a source (connection health).
pub fn health_key(source_id: &str) -> Key {
    Key::new(observations_pk(source_id), "HEALTH")
}

fn set_s(item: &mut Item, name: &str, v: impl Into<String>) {
    item.attrs.insert(name.into(), Attr::S(v.into()));
}

fn set_n(item: &mut Item, name: &str, v: i64) {
    item.attrs.insert(name.into(), Attr::N(v));
}

fn failed(e: &StoreError, index: usize) -> bool {
    matches!(e, StoreError::TransactionCanceled { reasons } if matches!(reasons.get(index), Some(CancelReason::ConditionFailed { .. })))
}

fn contended(e: &StoreError) -> bool {
    matches!(e, StoreError::TransactionCanceled { reasons } if reasons.iter().any(|r| matches!(r, CancelReason::Other(_))))
}

/// A stored source, read from its item.
#[derive(Debug, Clone)]
pub struct Source {
    pub item: Item,
    pub source_id: String,
    pub room_id: String,
    pub owner_account: String,
    pub adapter_profile: String,
    pub world_id: String,
    pub status: SourceStatus,
    pub generation: u32,
    pub bearer_hash: Option<String>,
    pub credential_expires_at: i64,
    pub admitted: bool,
    pub adapter_version: Option<String>,
    pub adapter_hash: Option<String>,
    pub manifest_hash: Option<String>,
    pub producer_epoch: Option<u64>,
}

impl Source {
    pub fn from_item(item: &Item) -> Self {
        let s = |n: &str| item.s(n).unwrap_or_default().to_owned();
        let status = match item.s("status") {
            Some("active") => SourceStatus::Active,
            Some("awaiting_claim") => SourceStatus::AwaitingClaim,
            _ => SourceStatus::Revoked,
        };
        Source {
            item: item.clone(),
            source_id: s("source_id"),
            room_id: s("room_id"),
            owner_account: s("owner_account"),
            adapter_profile: s("adapter_profile"),
            world_id: s("world_id"),
            status,
            generation: item.n("generation").unwrap_or(0) as u32,
            bearer_hash: item.s("bearer_hash").map(str::to_owned),
            credential_expires_at: item.n("credential_expires_at").unwrap_or(0),
            admitted: item.s("admitted") == Some("true"),
            adapter_version: item.s("adapter_version").map(str::to_owned),
            adapter_hash: item.s("adapter_hash").map(str::to_owned),
            manifest_hash: item.s("manifest_hash").map(str::to_owned),
            producer_epoch: item.n("producer_epoch").map(|e| e as u64),
        }
    }

    pub fn view(&self) -> SourceView {
        SourceView {
            schema: SOURCE_SCHEMA,
            source_id: self.source_id.clone(),
            room_id: self.room_id.clone(),
            adapter_profile: self.adapter_profile.clone(),
            world_id: self.world_id.clone(),
            label: self.item.s("label").map(str::to_owned),
            status: self.status,
            credentialed: self.status == SourceStatus::Active && self.bearer_hash.is_some(),
            credential_generation: self.generation,
            manifest: ManifestState {
                admitted: self.admitted,
                adapter_version: self.adapter_version.clone(),
                producer_epoch: self.producer_epoch,
                registered_at: self.item.s("registered_at").map(str::to_owned),
            },
            read_only: true,
            execution_enabled: false,
            created_at: self.item.s("created_at").unwrap_or_default().to_owned(),
            flags: FalseFlags::default(),
        }
    }
}

/// A source admitted to ingress for this request (every check of its credential held).
#[derive(Debug, Clone)]
pub struct AuthedSource {
    pub source: Source,
    pub bearer_hash: String,
}

impl AuthedSource {
    /// A report (a batch or a probe answer) must come under the source's admitted manifest
    /// and epoch: its manifest hash and epoch, or `manifest_not_registered` (an older epoch:
    /// `producer_epoch_stale`).
    pub(super) fn admitted_report(&self, epoch: u64, manifest_hash: &str) -> Result<(&str, u64), ApiError> {
        let s = &self.source;
        let (Some(admitted_hash), Some(admitted_epoch), true) = (&s.manifest_hash, s.producer_epoch, s.admitted) else {
            return Err(ApiError::ManifestNotRegistered);
        };
        if epoch < admitted_epoch {
            return Err(ApiError::ProducerEpochStale { current: admitted_epoch });
        }
        if epoch != admitted_epoch || !hashes_equal(manifest_hash, admitted_hash) {
            return Err(ApiError::ManifestNotRegistered);
        }
        Ok((admitted_hash, admitted_epoch))
    }

    /// The transaction guard of a report: the source is still active, under this bearer,
    /// admitted at this epoch when the write commits.
    pub(super) fn still_admitted(&self, epoch: u64) -> WriteOp {
        WriteOp::Check {
            key: source_key(&self.source.room_id, &self.source.source_id),
            cond: Cond::And(vec![
                Cond::eq_s("status", "active"),
                Cond::eq_s("bearer_hash", self.bearer_hash.clone()),
                Cond::eq_s("admitted", "true"),
                Cond::eq_n("producer_epoch", epoch as i64),
            ]),
        }
    }
}

/// One stored observation with its exact provenance. The provenance is the wire type,
/// flattened: the stored JSON keeps one flat object, and the executor's projection
/// ([`super::room_evidence::projected`]) hands the provenance on as it is.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredObservation {
    pub observation_ref: String,
    pub credential_generation: u32,
    pub kind: ObservationKind,
    pub event: Option<String>,
    pub summary: String,
    pub data: serde_json::Map<String, Value>,
    #[serde(flatten)]
    pub provenance: ObservationProvenance,
}

impl Source {
    /// The exact provenance of a report this source makes now, under its admitted
    /// manifest and epoch.
    pub(super) fn provenance_of(
        &self,
        manifest_hash: &str,
        producer_epoch: u64,
        request_id: &str,
        observed_at: DateTime<Utc>,
        received_at: DateTime<Utc>,
        probe_id: Option<String>,
    ) -> ObservationProvenance {
        ObservationProvenance {
            source_id: self.source_id.clone(),
            room_id: self.room_id.clone(),
            world_id: self.world_id.clone(),
            adapter_profile: self.adapter_profile.clone(),
            adapter_version: self.adapter_version.clone().unwrap_or_default(),
            adapter_hash: self.adapter_hash.clone().unwrap_or_default(),
            manifest_hash: manifest_hash.to_owned(),
            producer_epoch,
            request_id: request_id.to_owned(),
            observed_at,
            received_at,
            probe_id,
        }
    }
}

/// The room, its owner's membership and account policy: who may act on a source.
fn owner_ok(room: Option<&Item>, member: Option<&Item>, account: &str) -> bool {
    room.is_some_and(|r| r.s("status") == Some("active") && r.s("owner_account") == Some(account))
        && member.is_some_and(|m| m.s("role") == Some("owner"))
}

fn developer(policy: &AccountPolicy) -> Result<(), ApiError> {
    if policy.rooms_locked {
        return Err(ApiError::RoomFeatureLocked);
    }
    if policy.guest {
        return Err(ApiError::GuestNotAllowed);
    }
    if !policy.developer {
        return Err(ApiError::DeveloperRequired);
    }
    Ok(())
}

impl Services {
    fn plugin_config(&self, s: &Source) -> Result<PluginConfig, ApiError> {
        let profile =
            adapter(&s.adapter_profile).ok_or_else(|| ApiError::internal(std::io::Error::other("unknown profile")))?;
        Ok(PluginConfig::new(&self.config.public_base_url, &s.source_id, &s.room_id, &s.world_id, profile))
    }

    /// The room (active, owned by `account`) and the owner's membership, or not found.
    async fn source_room(&self, room_id: &str, account: &str) -> Result<RoomId, ApiError> {
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let got = self.store.batch_get(&[room_key(id.as_str()), member_key(id.as_str(), account)]).await?;
        if !owner_ok(got[0].as_ref(), got[1].as_ref(), account) {
            return Err(ApiError::NotFound);
        }
        Ok(id)
    }

    // ---------- the agent facade (bearer) ----------

    /// `POST /api/v1/rooms/{room_id}/sources`: the room owner (a developer account)
    /// creates a read-only source and its deferred credential delivery in one
    /// transaction. The stored receipt holds the delivery without its handle (the
    /// store keeps only the handle's hash), so a replay answers `claim_handle: null`.
    pub async fn create_source(
        &self,
        p: &Caller,
        room_id: &str,
        key: &IdempotencyKey,
        req: CreateSourceRequest,
    ) -> Result<Mutation, ApiError> {
        p.require(&[ROOM_SOURCES_MANAGE])?;
        developer(&p.policy)?;
        let profile = req.validate()?;
        // Ownership is checked inside the transaction (room active and owned by the caller,
        // the caller its owner member), not by a read before it: one round trip less.
        let room = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let body = serde_json::to_value(&req).map_err(ApiError::internal)?;
        let hash =
            hash_parts(&["room_source.request.v1", &p.owner_hash(), OP_CREATE, room.as_str(), &body.to_string()]);
        let rkey = receipt_key(&p.identity_hash(), OP_CREATE, key.as_str());
        let now = self.clock.now();
        let source_id = SourceId::generate();
        let handle = DeliveryHandle::generate();
        let expires = now.timestamp() + DELIVERY_TTL_SECS;
        let sk = source_key(room.as_str(), source_id.as_str());
        let mut item = Item::new(sk.pk, sk.sk)
            .with_s("source_id", source_id.as_str())
            .with_s("room_id", room.as_str())
            .with_s("owner_account", &p.account_id)
            .with_s("adapter_profile", profile.id)
            .with_s("world_id", &req.world_id)
            .with_s("status", "awaiting_claim")
            .with_n("generation", 1)
            .with_s("created_at", rfc3339(now));
        if let Some(label) = req.label.as_ref().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            item = item.with_s("label", label);
        }
        let source = Source::from_item(&item);
        let dk = delivery_key(&handle.hash());
        let delivery = Item::new(dk.pk, dk.sk)
            .with_s("room_id", room.as_str())
            .with_s("source_id", source_id.as_str())
            .with_s("owner_account", &p.account_id)
            .with_n("generation", 1)
            .with_n(EXPIRES_AT, expires);
        let created = SourceCreated {
            schema: SOURCE_CREATED_SCHEMA,
            source: source.view(),
            credential_delivery: CredentialDelivery {
                claim_handle: None,
                claim_url: format!("{}{CLAIM_PAGE_PATH}", self.config.public_base_url),
                expires_at: epoch_rfc3339(expires),
                bearer_included: false,
                plugin_config_included: false,
            },
            flags: FalseFlags::default(),
        };
        // The delivery is built here from server values only; redaction would take its
        // `bearer_included` key for a credential name, so it is set after projection.
        let mut stored = project(&created)?;
        stored["credential_delivery"] =
            serde_json::to_value(&created.credential_delivery).map_err(ApiError::internal)?;
        let receipt = Receipt {
            request_hash: hash.clone(),
            state: ReceiptState::Completed { status: 201, body: stored.to_string() },
            run_id: None,
            lease_until: 0,
            expires_at: self.receipt_expiry(),
        };
        let ops = vec![
            WriteOp::Put { item: receipt.to_item(&rkey), cond: Some(Cond::NotExists) },
            WriteOp::Put { item, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: delivery, cond: Some(Cond::NotExists) },
            WriteOp::Check {
                key: room_key(room.as_str()),
                cond: Cond::And(vec![
                    Cond::eq_s("status", "active"),
                    Cond::eq_s("owner_account", p.account_id.clone()),
                ]),
            },
            WriteOp::Check { key: member_key(room.as_str(), &p.account_id), cond: Cond::eq_s("role", "owner") },
        ];
        match self.store.transact(ops).await {
            Ok(()) => {
                // The handle is the one intentional exception to redaction: it is added
                // after projection, to this response only.
                let mut body = stored;
                body["credential_delivery"]["claim_handle"] = Value::String(handle.expose().to_owned());
                Ok(Mutation { status: 201, body, replayed: false })
            }
            Err(StoreError::TransactionCanceled { reasons }) => match reasons.first() {
                Some(CancelReason::ConditionFailed { current: Some(existing) }) => {
                    self.answer_from_receipt(existing, &hash)
                }
                Some(CancelReason::Other(_)) => Err(ApiError::IdempotencyInProgress),
                _ if reasons.iter().skip(3).any(|r| matches!(r, CancelReason::ConditionFailed { .. })) => {
                    Err(ApiError::NotFound)
                }
                _ => Err(ApiError::internal(std::io::Error::other("source id collision"))),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /api/v1/rooms/{room_id}/sources`: the owner's bounded listing, no credentials.
    pub async fn list_sources(&self, p: &Caller, room_id: &str) -> Result<Value, ApiError> {
        p.require(&[ROOM_SOURCES_MANAGE])?;
        if p.policy.rooms_locked {
            return Err(ApiError::RoomFeatureLocked);
        }
        let room = self.source_room(room_id, &p.account_id).await?;
        let page = self.store.query(&room_key(room.as_str()).pk, "SRC#", None, MAX_LISTED_SOURCES).await?;
        let sources = page.items.iter().map(|i| Source::from_item(i).view()).collect();
        project(&SourceList {
            schema: SOURCE_LIST_SCHEMA,
            room_id: room.to_string(),
            sources,
            has_more: page.has_more,
            flags: FalseFlags::default(),
        })
    }

    // ---------- the browser lane (cookie) ----------

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
        developer(&s.policy)?;
        let handle = DeliveryHandle::parse(&req.claim_handle).ok_or(ApiError::ClaimHandleInvalid)?;
        let dk = delivery_key(&handle.hash());
        for _ in 0..RACE_RETRIES {
            let delivery = self.store.get(&dk).await?;
            // TTL deletion is lazy and the store's clock is not the service's: check it here.
            let delivery = delivery
                .filter(|d| d.n(EXPIRES_AT).is_some_and(|at| at > self.clock.epoch()))
                .filter(|d| d.s("owner_account") == Some(s.account_id.as_str()))
                .ok_or(ApiError::ClaimHandleInvalid)?;
            let (room_id, source_id) = (delivery.s("room_id").unwrap_or(""), delivery.s("source_id").unwrap_or(""));
            let generation = delivery.n("generation").unwrap_or(0);
            let got = self
                .store
                .batch_get(&[room_key(room_id), member_key(room_id, &s.account_id), source_key(room_id, source_id)])
                .await?;
            if !owner_ok(got[0].as_ref(), got[1].as_ref(), &s.account_id) {
                return Err(ApiError::ClaimHandleInvalid);
            }
            let source = got[2].as_ref().map(Source::from_item).ok_or(ApiError::ClaimHandleInvalid)?;
            if source.status != SourceStatus::AwaitingClaim || source.generation as i64 != generation {
                return Err(ApiError::ClaimHandleInvalid);
            }
            let issued = self.issue_bearer(&source, generation as u32)?;
            let mut ops = vec![WriteOp::Delete {
                key: dk.clone(),
                cond: Some(Cond::And(vec![Cond::Exists, Cond::eq_s("owner_account", s.account_id.clone())])),
            }];
            ops.extend(
                issued
                    .ops(Cond::And(vec![Cond::eq_s("status", "awaiting_claim"), Cond::eq_n("generation", generation)])),
            );
            match self.store.transact(ops).await {
                Ok(()) => return Ok(issued.credential),
                Err(e) if failed(&e, 0) || failed(&e, 1) => return Err(ApiError::ClaimHandleInvalid),
                Err(e) if failed(&e, 3) => return Err(ApiError::ClaimHandleInvalid),
                Err(e) if contended(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::ClaimHandleInvalid)
    }

    /// `POST /api/account/room-sources/rotations`: a new bearer for an active source
    /// (shown once); the old one is refused from this moment, and the producer must
    /// register its manifest again.
    pub async fn rotate_source_credential(&self, s: &Session, req: SourceRef) -> Result<SourceCredential, ApiError> {
        s.require_member()?;
        developer(&s.policy)?;
        let source_id = SourceId::parse(&req.source_id).ok_or(ApiError::NotFound)?;
        for _ in 0..RACE_RETRIES {
            let source = self.owned_source(s, &req.room_id, source_id.as_str()).await?;
            let old = match (&source.status, &source.bearer_hash) {
                (SourceStatus::Active, Some(h)) => h.clone(),
                _ => return Err(ApiError::NotFound),
            };
            let generation = source.generation + 1;
            let issued = self.issue_bearer(&source, generation)?;
            let mut ops =
                issued.ops(Cond::And(vec![Cond::eq_s("status", "active"), Cond::eq_s("bearer_hash", old.clone())]));
            ops.push(WriteOp::Delete { key: bearer_key(&old), cond: None });
            match self.store.transact(ops).await {
                Ok(()) => return Ok(issued.credential),
                Err(e) if failed(&e, 0) || contended(&e) => continue,
                Err(e) if failed(&e, 2) => return Err(ApiError::NotFound),
                Err(e) => return Err(e.into()),
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
            let mut item = source.item.clone();
            set_s(&mut item, "status", "revoked");
            set_s(&mut item, "revoked_at", rfc3339(self.clock.now()));
            set_s(&mut item, "admitted", "false");
            item.attrs.remove("bearer_hash");
            let previous = source.item.s("status").unwrap_or("").to_owned();
            let mut ops = vec![WriteOp::Put { item, cond: Some(Cond::eq_s("status", previous)) }];
            if let Some(h) = &source.bearer_hash {
                ops.push(WriteOp::Delete { key: bearer_key(h), cond: None });
            }
            match self.store.transact(ops).await {
                Ok(()) => return Ok(revocation("revoked")),
                Err(e) if failed(&e, 0) || contended(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The session's own source in its own active room (others' are not found).
    async fn owned_source(&self, s: &Session, room_id: &str, source_id: &str) -> Result<Source, ApiError> {
        let room = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let got = self
            .store
            .batch_get(&[
                room_key(room.as_str()),
                member_key(room.as_str(), &s.account_id),
                source_key(room.as_str(), source_id),
            ])
            .await?;
        if !owner_ok(got[0].as_ref(), got[1].as_ref(), &s.account_id) {
            return Err(ApiError::NotFound);
        }
        let source = got[2].as_ref().map(Source::from_item).ok_or(ApiError::NotFound)?;
        if source.owner_account != s.account_id {
            return Err(ApiError::NotFound);
        }
        Ok(source)
    }

    fn issue_bearer(&self, source: &Source, generation: u32) -> Result<Issued, ApiError> {
        let bearer = SourceBearer::generate();
        let now = self.clock.now();
        let expires = now.timestamp() + CREDENTIAL_TTL_SECS;
        let mut item = source.item.clone();
        set_s(&mut item, "status", "active");
        set_s(&mut item, "bearer_hash", bearer.hash());
        set_n(&mut item, "generation", generation as i64);
        set_n(&mut item, "credential_expires_at", expires);
        set_s(&mut item, "credentialed_at", rfc3339(now));
        // A new credential starts unadmitted: its producer registers its manifest again.
        set_s(&mut item, "admitted", "false");
        let bk = bearer_key(&bearer.hash());
        let lookup = Item::new(bk.pk, bk.sk)
            .with_s("room_id", &source.room_id)
            .with_s("source_id", &source.source_id)
            .with_s("owner_account", &source.owner_account)
            .with_n("generation", generation as i64);
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
        Ok(Issued {
            source_item: item,
            lookup,
            room_id: source.room_id.clone(),
            owner: source.owner_account.clone(),
            credential,
        })
    }

    // ---------- ingress (source bearer) ----------

    /// Authenticates a source bearer: hash lookup, then every boundary again (source
    /// active with this exact bearer hash, unexpired; room active and still owned by the
    /// source's owner, who is still its owner member; the owner's policy still a
    /// developer's, unlocked). Any failure is the same `source_credential_invalid`.
    pub async fn authenticate_source(&self, raw_bearer: &str) -> Result<AuthedSource, ApiError> {
        let bearer = SourceBearer::parse(raw_bearer).ok_or(ApiError::SourceCredentialInvalid)?;
        let hash = bearer.hash();
        let lookup = self.store.get(&bearer_key(&hash)).await?.ok_or(ApiError::SourceCredentialInvalid)?;
        let (room_id, source_id) = (lookup.s("room_id").unwrap_or(""), lookup.s("source_id").unwrap_or(""));
        let owner = lookup.s("owner_account").unwrap_or("");
        // One BatchGetItem after the lookup: the source, its room, the owner's membership
        // and the owner's account (policy).
        let got = self
            .store
            .batch_get(&[
                source_key(room_id, source_id),
                room_key(room_id),
                member_key(room_id, owner),
                account_key(owner),
            ])
            .await?;
        let source = got[0].as_ref().map(Source::from_item).ok_or(ApiError::SourceCredentialInvalid)?;
        if source.owner_account != owner {
            return Err(ApiError::SourceCredentialInvalid);
        }
        let got = &got[1..];
        let current = source.bearer_hash.as_deref().is_some_and(|h| hashes_equal(h, &hash));
        let policy_ok = got[2].as_ref().map(policy_of).is_some_and(|p| developer(&p).is_ok());
        if source.status != SourceStatus::Active
            || !current
            || source.credential_expires_at <= self.clock.epoch()
            || !owner_ok(got[0].as_ref(), got[1].as_ref(), &source.owner_account)
            || !policy_ok
        {
            return Err(ApiError::SourceCredentialInvalid);
        }
        Ok(AuthedSource { source, bearer_hash: hash })
    }

    /// `POST …/ingress/manifest`: admitted only when it matches the registry and the
    /// source exactly; a lower producer epoch than the admitted one is refused.
    pub async fn register_manifest(&self, a: &AuthedSource, m: Manifest) -> Result<ManifestReceipt, ApiError> {
        let s = &a.source;
        m.check(&s.adapter_profile, &s.world_id).map_err(|r| ApiError::ManifestNotAdmitted { reason: r.reason() })?;
        if let Some(current) = s.producer_epoch.filter(|e| *e > m.producer_epoch) {
            return Err(ApiError::ProducerEpochStale { current });
        }
        let epoch = i64::try_from(m.producer_epoch)
            .map_err(|_| ApiError::InvalidRequest("producer_epoch: too large".into()))?;
        let mut item = s.item.clone();
        set_s(&mut item, "admitted", "true");
        set_s(&mut item, "adapter_version", &m.adapter_version);
        set_s(&mut item, "adapter_hash", &m.adapter_hash);
        set_s(&mut item, "manifest_hash", &m.manifest_hash);
        set_n(&mut item, "producer_epoch", epoch);
        set_s(&mut item, "registered_at", rfc3339(self.clock.now()));
        let cond = Cond::And(vec![
            Cond::eq_s("status", "active"),
            Cond::eq_s("bearer_hash", a.bearer_hash.clone()),
            Cond::Or(vec![Cond::Missing("producer_epoch".into()), Cond::Lt("producer_epoch".into(), epoch + 1)]),
        ]);
        match self.store.put(item, Some(cond)).await {
            Ok(()) => Ok(ManifestReceipt {
                schema: MANIFEST_RECEIPT_SCHEMA,
                source_id: s.source_id.clone(),
                admitted: true,
                producer_epoch: m.producer_epoch,
                manifest_hash: m.manifest_hash,
            }),
            Err(StoreError::ConditionFailed { current }) => {
                let now = current.as_ref().map(Source::from_item);
                match now {
                    Some(n)
                        if n.bearer_hash.as_deref() == Some(a.bearer_hash.as_str())
                            && n.status == SourceStatus::Active =>
                    {
                        Err(ApiError::ProducerEpochStale { current: n.producer_epoch.unwrap_or(0) })
                    }
                    _ => Err(ApiError::SourceCredentialInvalid),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `POST …/ingress/observations`: a bounded batch under the admitted manifest and
    /// epoch, stored with a TTL and its exact provenance, all or nothing.
    pub async fn ingest_observations(
        &self,
        a: &AuthedSource,
        batch: ObservationBatch,
    ) -> Result<ObservationReceipt, ApiError> {
        let s = &a.source;
        let (manifest_hash, epoch) = a.admitted_report(batch.producer_epoch, &batch.manifest_hash)?;
        let profile = adapter(&s.adapter_profile).ok_or(ApiError::SourceCredentialInvalid)?;
        let now = self.clock.now();
        let ttl = self.config.sources.observation_ttl;
        batch.validate(profile, now.timestamp_millis(), ttl.as_millis() as i64)?;
        let expires = now.timestamp() + ttl.as_secs() as i64;
        let pk = observations_pk(&s.source_id);
        let mut ops = Vec::with_capacity(batch.observations.len() + 2);
        let mut latest = 0i64;
        for o in batch.observations {
            let at = o.observed_at.timestamp_millis();
            latest = latest.max(at);
            let stored = StoredObservation {
                observation_ref: observation_ref(&s.source_id, &o.request_id),
                credential_generation: s.generation,
                provenance: s.provenance_of(manifest_hash, epoch, &o.request_id, o.observed_at, now, None),
                kind: o.kind,
                event: o.event,
                summary: o.summary,
                data: o.data,
            };
            let item = Item::new(pk.clone(), observation_sk(at, &o.request_id))
                .with_s(BODY, serde_json::to_string(&stored).map_err(ApiError::internal)?)
                .with_n(EXPIRES_AT, expires);
            ops.push(WriteOp::Put { item, cond: Some(Cond::NotExists) });
            // The request identity is unique per source whatever its observed-at time.
            let marker = Item::new(pk.clone(), format!("REQ#{}", o.request_id)).with_n(EXPIRES_AT, expires);
            ops.push(WriteOp::Put { item: marker, cond: Some(Cond::NotExists) });
        }
        let n = ops.len();
        let hk = health_key(&s.source_id);
        ops.push(WriteOp::Put {
            item: Item::new(hk.pk, hk.sk)
                .with_n("last_observed_at_ms", latest)
                .with_s("last_received_at", rfc3339(now))
                .with_n(EXPIRES_AT, expires),
            cond: Some(Cond::Or(vec![Cond::NotExists, Cond::Lt("last_observed_at_ms".into(), latest + 1)])),
        });
        ops.push(a.still_admitted(epoch));
        match self.store.transact(ops.clone()).await {
            Ok(()) => {}
            Err(e) if failed(&e, n + 1) => return Err(ApiError::ManifestNotRegistered),
            Err(e) if (0..n).any(|i| failed(&e, i)) => return Err(ApiError::DuplicateObservation),
            // An older batch after a newer one: store it, keep the newer health marker.
            Err(e) if failed(&e, n) => {
                ops.remove(n);
                self.store.transact(ops).await.map_err(|e| match e {
                    StoreError::TransactionCanceled { .. } => ApiError::DuplicateObservation,
                    other => other.into(),
                })?;
            }
            Err(e) => return Err(e.into()),
        }
        Ok(ObservationReceipt {
            schema: OBSERVATION_RECEIPT_SCHEMA,
            source_id: s.source_id.clone(),
            accepted: (n / 2) as u32,
            expires_at: epoch_rfc3339(expires),
        })
    }

    /// The newest (at most `limit`) stored observations of a source observed within
    /// `max_age_ms` of now, oldest first. The store reads ascending, so the window is paged
    /// through (at most `MAX_WINDOW_PAGES` pages) keeping its tail.
    pub async fn fresh_observations(
        &self,
        source_id: &str,
        max_age_ms: i64,
        limit: usize,
    ) -> Result<Vec<StoredObservation>, ApiError> {
        let since = self.clock.now().timestamp_millis() - max_age_ms;
        let mut after = observation_sk(since, "");
        let pk = observations_pk(source_id);
        let mut tail: std::collections::VecDeque<Item> = std::collections::VecDeque::with_capacity(limit + 1);
        for _ in 0..MAX_WINDOW_PAGES {
            let page = self.store.query(&pk, "OBS#", Some(&after), WINDOW_PAGE).await?;
            if let Some(last) = page.items.last() {
                after = last.sk.clone();
            }
            for item in page.items {
                tail.push_back(item);
                if tail.len() > limit {
                    tail.pop_front();
                }
            }
            if !page.has_more {
                break;
            }
        }
        tail.iter().map(|i| serde_json::from_str(i.s(BODY).unwrap_or_default()).map_err(ApiError::internal)).collect()
    }
}

impl Services {
    /// One room's sources and their health markers: a Query, then a BatchGetItem.
    async fn sources_with_health(&self, room_id: String) -> Result<(String, Vec<Source>, Vec<Option<Item>>), ApiError> {
        let page = self.store.query(&room_key(&room_id).pk, "SRC#", None, MAX_LISTED_SOURCES).await?;
        let sources: Vec<Source> = page.items.iter().map(Source::from_item).collect();
        let health_keys: Vec<Key> = sources.iter().map(|s| health_key(&s.source_id)).collect();
        let healths = if health_keys.is_empty() { vec![] } else { self.store.batch_get(&health_keys).await? };
        Ok((room_id, sources, healths))
    }

    /// Device Check (`helix_environment_device_check`, `helix.rooms.read`): for each room
    /// the caller belongs to, each source's connection health. Never a credential, an
    /// endpoint or a player id; a token with only `helix.rooms.read` sees nothing else.
    pub async fn device_check(&self, p: &Caller) -> Result<DeviceCheckReport, ApiError> {
        p.require(&[crate::domain::scopes::ROOMS_READ])?;
        if p.policy.rooms_locked {
            return Err(ApiError::RoomFeatureLocked);
        }
        let entries = self
            .store
            .query(&format!("ACCOUNT#{}", p.account_id), "ROOM#", None, super::rooms::MAX_LISTED_ROOMS)
            .await?;
        let ids: Vec<String> = entries.items.iter().filter_map(|i| i.s("room_id").map(str::to_owned)).collect();
        let max_age_ms = self.config.sources.evidence_max_age.as_millis() as u64;
        let now_ms = self.clock.now().timestamp_millis();
        let now_epoch = self.clock.epoch();
        let mut rooms = vec![];
        if !ids.is_empty() {
            let keys: Vec<Key> = ids.iter().flat_map(|id| [room_key(id), member_key(id, &p.account_id)]).collect();
            let got = self.store.batch_get(&keys).await?;
            let active: Vec<String> = ids
                .iter()
                .zip(got.chunks(2))
                .filter(|(_, pair)| matches!(pair, [Some(room), Some(_)] if room.s("status") == Some("active")))
                .map(|(id, _)| id.clone())
                .collect();
            // Several rooms at once: the request's depth does not grow with its rooms.
            let per_room: Vec<_> = futures::stream::iter(active.into_iter().map(|id| self.sources_with_health(id)))
                .buffered(DEVICE_CHECK_ROOM_CONCURRENCY)
                .try_collect()
                .await?;
            for (id, sources, healths) in per_room {
                let sources = sources
                    .iter()
                    .zip(healths)
                    .map(|(s, h)| {
                        let credentialed = s.status == SourceStatus::Active
                            && s.bearer_hash.is_some()
                            && s.credential_expires_at > now_epoch;
                        let age = h
                            .filter(|h| h.n(EXPIRES_AT).is_none_or(|at| at > now_epoch))
                            .and_then(|h| h.n("last_observed_at_ms"))
                            .map(|at| (now_ms - at).max(0) as u64);
                        let freshness = match age {
                            None => Freshness::NoObservations,
                            Some(a) if a <= max_age_ms => Freshness::Fresh,
                            Some(_) => Freshness::Stale,
                        };
                        SourceHealth {
                            source_id: s.source_id.clone(),
                            adapter_profile: s.adapter_profile.clone(),
                            status: s.status,
                            credentialed,
                            registered: s.item.s("registered_at").is_some(),
                            admitted: credentialed && s.admitted,
                            producer_epoch: s.producer_epoch,
                            last_observation_age_ms: age,
                            freshness,
                        }
                    })
                    .collect();
                rooms.push(RoomHealth { room_id: id, sources });
            }
        }
        Ok(DeviceCheckReport {
            schema: DEVICE_CHECK_SCHEMA,
            rooms,
            freshness_max_age_ms: max_age_ms,
            checked_at: rfc3339(self.clock.now()),
            execution_enabled: false,
            flags: FalseFlags::default(),
        })
    }
}

/// A bearer being issued: the source update, its lookup item and the one response.
struct Issued {
    source_item: Item,
    lookup: Item,
    room_id: String,
    owner: String,
    credential: SourceCredential,
}

impl Issued {
    /// [source put (guarded by `cond`), lookup put (new), room check (owner, active)].
    fn ops(&self, cond: Cond) -> Vec<WriteOp> {
        vec![
            WriteOp::Put { item: self.source_item.clone(), cond: Some(cond) },
            WriteOp::Put { item: self.lookup.clone(), cond: Some(Cond::NotExists) },
            WriteOp::Check {
                key: room_key(&self.room_id),
                cond: Cond::And(vec![Cond::eq_s("status", "active"), Cond::eq_s("owner_account", self.owner.clone())]),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observations stored before the provenance was embedded are one flat object: the
    /// flattened type reads them, and writes the same shape back.
    #[test]
    fn a_stored_observation_keeps_its_flat_shape() {
        let flat = serde_json::json!({
            "observation_ref": "obsv_1", "source_id": "src_1", "room_id": "room_1",
            "world_id": "overworld", "adapter_profile": "minecraft", "adapter_version": "1.0.0",
            "adapter_hash": "a", "manifest_hash": "m", "producer_epoch": 2,
            "credential_generation": 3, "request_id": "req-0001", "kind": "snapshot",
            "event": null, "summary": "s", "data": {}, "observed_at": "2026-11-30T12:00:00Z",
            "received_at": "2026-11-30T12:00:01Z"
        });
        let stored: StoredObservation = serde_json::from_value(flat.clone()).unwrap();
        assert_eq!((stored.provenance.producer_epoch, stored.credential_generation), (2, 3));
        assert_eq!(stored.provenance.probe_id, None);
        let mut back = serde_json::to_value(&stored).unwrap();
        for t in ["observed_at", "received_at"] {
            let at: DateTime<Utc> = serde_json::from_value(back[t].clone()).unwrap();
            back[t] = serde_json::to_value(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap();
        }
        assert_eq!(back, flat);
    }
}
