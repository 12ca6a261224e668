//! Shared Live Room use cases: rooms (create, list, inspect), run-room bindings, claimed
//! run-chat bindings, the browser's observer lane, and the disabled command request.
//! Every bind/claim/withdraw is one transaction; the one-active-binding rule is a
//! conditional put on a per-run slot item; withdrawal marks revoked (never deletes the
//! binding) and frees the slot. Every projection passes `domain::room::redact`.
//! Must not depend on `http` or `mcp`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::auth::principal::Principal;
use crate::domain::hash_parts;
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::room::*;
use crate::domain::run::{Authority, Completion, Run};
use crate::domain::scopes::{ROOMS_MANAGE, ROOMS_READ, RUNS_WRITE};
use crate::error::ApiError;
use crate::store::{CancelReason, Cond, EXPIRES_AT, Item, Key, StoreError, WriteOp};

use super::records::{BODY, Receipt, ReceiptState, event_from_item, receipt_key, run_from_item, run_key};
use super::sessions::Session;
use super::{Caller, Mutation, Services};

const OP_CREATE: &str = "room.create";
/// How long a browser-issued chat claim handle stays usable.
pub const CLAIM_TTL_SECS: i64 = 600;
/// How many rooms one listing returns (membership entries, each with two reads).
pub const MAX_LISTED_ROOMS: usize = 50;
/// Bounded re-reads of a bind that lost a race with a concurrent writer.
const RACE_RETRIES: usize = 6;
const KIND_RUN_ROOM: &str = "run_room";
const KIND_RUN_CHAT: &str = "run_chat";

// ---------- keys (the room rows of the one table) ----------

pub fn room_key(room_id: &str) -> Key {
    Key::new(format!("ROOM#{room_id}"), "ROOM")
}
pub fn member_key(room_id: &str, account_id: &str) -> Key {
    Key::new(format!("ROOM#{room_id}"), format!("MEM#{account_id}"))
}
/// The account's listing entry of a room it belongs to (written with the membership).
pub fn account_room_key(account_id: &str, room_id: &str) -> Key {
    Key::new(format!("ACCOUNT#{account_id}"), format!("ROOM#{room_id}"))
}
/// The one-active-run-room-binding slot of a run.
pub fn run_room_slot(run_id: &str) -> Key {
    Key::new(format!("RUNROOM#{run_id}"), "SLOT")
}
/// The one-active-run-chat-binding slot of a run.
pub fn run_chat_slot(run_id: &str) -> Key {
    Key::new(format!("RUNCHAT#{run_id}"), "SLOT")
}
/// A binding, by the hash of its opaque reference.
pub fn bind_key(binding_ref: &str) -> Key {
    Key::new(format!("BIND#{}", hash_parts(&["room-binding.v1", binding_ref])), "BIND")
}
/// A chat claim handle, by its hash (TTL; consumed by a conditional delete).
pub fn claim_key(handle_hash: &str) -> Key {
    Key::new(format!("CLAIM#{handle_hash}"), "CLAIM")
}
pub fn observer_key(observer_ref: &str) -> Key {
    Key::new(format!("OBS#{observer_ref}"), "OBS")
}
pub fn snapshot_key(observer_ref: &str) -> Key {
    Key::new(format!("OBS#{observer_ref}"), "SNAP")
}

pub(super) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(super) fn epoch_rfc3339(epoch: i64) -> String {
    DateTime::<Utc>::from_timestamp(epoch, 0).map(rfc3339).unwrap_or_default()
}

/// Serialises a projection and redacts it (the one boundary every room output crosses).
pub fn project(value: &impl Serialize) -> Result<Value, ApiError> {
    Ok(redact(serde_json::to_value(value).map_err(ApiError::internal)?))
}

fn broken(what: &'static str) -> ApiError {
    ApiError::internal(std::io::Error::other(what))
}

/// The room feature lock of the current account policy (withdrawals skip this check).
fn unlocked(locked: bool) -> Result<(), ApiError> {
    if locked { Err(ApiError::RoomFeatureLocked) } else { Ok(()) }
}

fn check_principal(p: &Principal) -> Result<(), ApiError> {
    unlocked(p.policy.rooms_locked)
}

/// A run id from a request body: credential-shaped values are refused before any read.
fn body_run_id(raw: &str) -> Result<RunId, ApiError> {
    if credential_shaped(raw) && !is_own_identifier(raw) {
        return Err(ApiError::CredentialRejected("run_id: credential-shaped values are refused".into()));
    }
    RunId::parse(raw).ok_or_else(|| ApiError::InvalidRequest("run_id: not a run id".into()))
}

fn body_room_id(raw: &str) -> Result<RoomId, ApiError> {
    if credential_shaped(raw) && !is_own_identifier(raw) {
        return Err(ApiError::CredentialRejected("room_id: credential-shaped values are refused".into()));
    }
    RoomId::parse(raw).ok_or_else(|| ApiError::InvalidRequest("room_id: not a room id".into()))
}

fn owned_run(p: &Principal, item: Option<&Item>) -> Result<Run, ApiError> {
    let item = item.ok_or(ApiError::NotFound)?;
    if item.s("owner_hash") != Some(p.owner_hash().as_str()) {
        return Err(ApiError::NotFound);
    }
    run_from_item(item)
}

/// The stored room record.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct RoomRecord {
    room_id: String,
    name: String,
    description: Option<String>,
    owner_account: String,
    status: String,
    consent_version: u32,
    created_at: DateTime<Utc>,
}

fn room_of(item: &Item) -> Result<RoomRecord, ApiError> {
    serde_json::from_str(item.s(BODY).ok_or_else(|| broken("room without body"))?).map_err(ApiError::internal)
}

fn room_view(room: &RoomRecord, member: &Item, account_id: &str) -> RoomView {
    let role = if member.s("role") == Some("owner") { RoomRole::Owner } else { RoomRole::Member };
    let accepted = member.n("consent_version").unwrap_or(0);
    RoomView {
        schema: RoomSchemaName,
        room_id: room.room_id.clone(),
        name: room.name.clone(),
        description: room.description.clone(),
        status: room.status.clone(),
        role,
        consent_version: room.consent_version,
        consent_current: accepted == room.consent_version as i64,
        owned_by_caller: room.owner_account == account_id,
        created_at: rfc3339(room.created_at),
        execution_enabled: false,
        flags: FalseFlags::default(),
    }
}

/// A binding as stored.
struct Binding {
    kind: String,
    owner_hash: String,
    status: String,
    run_id: String,
    created_at: String,
    item: Item,
}

fn binding_of(item: Item) -> Binding {
    let s = |n: &str| item.s(n).unwrap_or_default().to_owned();
    Binding {
        kind: s("kind"),
        owner_hash: s("owner_hash"),
        status: s("status"),
        run_id: s("run_id"),
        created_at: s("created_at"),
        item,
    }
}

/// The stored observer record (its claim item carries a copy until consumed).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct ObserverRecord {
    observer_ref: String,
    account_id: String,
    chat_hash: String,
    claim_hash: String,
    /// awaiting_claim | bound | disconnected
    status: String,
    binding_ref: Option<String>,
    run_id: Option<String>,
    snapshot_ref: Option<String>,
    snapshot_message_count: u32,
    snapshot_char_count: u32,
    created_at: DateTime<Utc>,
    claim_expires_at: i64,
}

fn observer_item(o: &ObserverRecord) -> Result<Item, ApiError> {
    let key = observer_key(&o.observer_ref);
    Ok(Item::new(key.pk, key.sk)
        .with_s("status", &o.status)
        .with_s("account_id", &o.account_id)
        .with_s(BODY, serde_json::to_string(o).map_err(ApiError::internal)?))
}

fn observer_of(item: &Item) -> Result<ObserverRecord, ApiError> {
    serde_json::from_str(item.s(BODY).ok_or_else(|| broken("observer without body"))?).map_err(ApiError::internal)
}

fn revocation(binding_ref: &str, status: RevocationStatus) -> RevocationReceipt {
    RevocationReceipt {
        schema: RevocationSchemaName,
        binding_ref: binding_ref.to_owned(),
        binding_status: BindingStatus::Revoked,
        revocation_status: status,
        flags: FalseFlags::default(),
    }
}

fn cancelled_at(e: &StoreError, index: usize) -> Option<&CancelReason> {
    match e {
        StoreError::TransactionCanceled { reasons } => reasons.get(index),
        _ => None,
    }
}

fn failed(e: &StoreError, index: usize) -> bool {
    matches!(cancelled_at(e, index), Some(CancelReason::ConditionFailed { .. }))
}

fn contended(e: &StoreError) -> bool {
    matches!(e, StoreError::TransactionCanceled { reasons } if reasons.iter().any(|r| matches!(r, CancelReason::Other(_))))
}

impl Services {
    fn room_now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    // ---------- rooms ----------

    /// `POST /api/v1/rooms`: idempotent like a run start; one transaction writes the
    /// receipt, the room, the owner's membership and the owner's listing entry.
    pub async fn create_room(
        &self,
        p: &Caller,
        key: &IdempotencyKey,
        req: CreateRoomRequest,
    ) -> Result<Mutation, ApiError> {
        p.require(&[ROOMS_MANAGE])?;
        check_principal(p)?;
        req.validate()?;
        let body = serde_json::to_value(&req).map_err(ApiError::internal)?;
        let hash = hash_parts(&["room.request.v1", &p.owner_hash(), OP_CREATE, &body.to_string()]);
        let rkey = receipt_key(&p.identity_hash(), OP_CREATE, key.as_str());
        let now = self.room_now();
        let room = RoomRecord {
            room_id: RoomId::generate().to_string(),
            name: req.name.trim().to_owned(),
            description: req.description.as_ref().map(|d| d.trim().to_owned()).filter(|d| !d.is_empty()),
            owner_account: p.account_id.clone(),
            status: "active".into(),
            consent_version: 1,
            created_at: now,
        };
        let rk = room_key(&room.room_id);
        let room_item = Item::new(rk.pk, rk.sk)
            .with_s("owner_account", &room.owner_account)
            .with_s("status", &room.status)
            .with_n("consent_version", 1)
            .with_s(BODY, serde_json::to_string(&room).map_err(ApiError::internal)?);
        let mk = member_key(&room.room_id, &p.account_id);
        let consent_receipt = consent_receipt_ref(&room.room_id, &p.account_id, 1);
        let ck = consent_key(&room.room_id, &p.account_id, 1);
        let consent =
            Item::new(ck.pk, ck.sk).with_s("consent_receipt", &consent_receipt).with_s("accepted_at", rfc3339(now));
        let member = Item::new(mk.pk, mk.sk)
            .with_s("role", "owner")
            .with_n("consent_version", 1)
            .with_s("consent_receipt", &consent_receipt)
            .with_s("accepted_at", rfc3339(now));
        let ek = account_room_key(&p.account_id, &room.room_id);
        let entry = Item::new(ek.pk, ek.sk).with_s("room_id", &room.room_id);
        let response = project(&room_view(&room, &member, &p.account_id))?;
        let receipt = Receipt {
            request_hash: hash.clone(),
            state: ReceiptState::Completed { status: 201, body: response.to_string() },
            run_id: None,
            lease_until: 0,
            expires_at: self.receipt_expiry(),
        };
        let ops = vec![
            WriteOp::Put { item: receipt.to_item(&rkey), cond: Some(Cond::NotExists) },
            WriteOp::Put { item: room_item, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: member, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: entry, cond: Some(Cond::NotExists) },
            // Creating the room is the owner's acceptance of its first consent version.
            WriteOp::Put { item: consent, cond: Some(Cond::NotExists) },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(Mutation { status: 201, body: response, replayed: false }),
            Err(StoreError::TransactionCanceled { reasons }) => match reasons.first() {
                Some(CancelReason::ConditionFailed { current: Some(existing) }) => {
                    self.answer_from_receipt(existing, &hash)
                }
                Some(CancelReason::Other(_)) => Err(ApiError::IdempotencyInProgress),
                _ => Err(broken("room id collision")),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /api/v1/rooms`: only rooms the linked account is a member of.
    pub async fn list_rooms(&self, p: &Caller) -> Result<Value, ApiError> {
        p.require(&[ROOMS_READ])?;
        check_principal(p)?;
        let pk = format!("ACCOUNT#{}", p.account_id);
        let page = self.store.query(&pk, "ROOM#", None, MAX_LISTED_ROOMS).await?;
        let ids: Vec<String> = page.items.iter().filter_map(|i| i.s("room_id").map(str::to_owned)).collect();
        let mut rooms = vec![];
        if !ids.is_empty() {
            let keys: Vec<Key> = ids.iter().flat_map(|id| [room_key(id), member_key(id, &p.account_id)]).collect();
            let got = self.store.batch_get(&keys).await?;
            for pair in got.chunks(2) {
                // Membership is what counts: a listing entry without a live membership is stale.
                if let [Some(room), Some(member)] = pair {
                    let room = room_of(room)?;
                    if room.status == "active" {
                        rooms.push(room_view(&room, member, &p.account_id));
                    }
                }
            }
        }
        project(&RoomList { schema: RoomListSchemaName, rooms, has_more: page.has_more, flags: FalseFlags::default() })
    }

    /// `GET /api/v1/rooms/{room_id}`: membership and policy checked; others' rooms are not found.
    pub async fn inspect_room(&self, p: &Caller, room_id: &str) -> Result<Value, ApiError> {
        p.require(&[ROOMS_READ])?;
        check_principal(p)?;
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let got = self.store.batch_get(&[room_key(id.as_str()), member_key(id.as_str(), &p.account_id)]).await?;
        let (Some(room), Some(member)) = (&got[0], &got[1]) else { return Err(ApiError::NotFound) };
        let room = room_of(room)?;
        if room.status != "active" {
            return Err(ApiError::NotFound);
        }
        project(&room_view(&room, member, &p.account_id))
    }

    /// `POST /api/v1/rooms/{room_id}/commands`: never executes anything.
    pub async fn room_command(&self, p: &Caller) -> Result<Value, ApiError> {
        p.require(&[ROOMS_MANAGE])?;
        Err(ApiError::CommandExecutionNotEnabled)
    }

    // ---------- run-room bindings ----------

    /// `POST /api/v1/rooms/run-bindings`: one active binding per run (a conditional put
    /// on the run's slot); an exact retry returns the existing binding (200), binding the
    /// run to another room is `run_already_bound`. Returns (created, receipt).
    pub async fn bind_run(&self, p: &Caller, req: RunBindingRequest) -> Result<(bool, Value), ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let run_id = body_run_id(&req.run_id)?;
        let room_id = body_room_id(&req.room_id)?;
        check_principal(p)?;
        let (rk, mk, sk) =
            (room_key(room_id.as_str()), member_key(room_id.as_str(), &p.account_id), run_room_slot(run_id.as_str()));
        for _ in 0..RACE_RETRIES {
            let got = self.store.batch_get(&[run_key(run_id.as_str()), rk.clone(), mk.clone(), sk.clone()]).await?;
            let run = owned_run(p, got[0].as_ref())?;
            let (Some(room), Some(member)) = (&got[1], &got[2]) else { return Err(ApiError::NotFound) };
            let room = room_of(room)?;
            if room.status != "active" {
                return Err(ApiError::NotFound);
            }
            if member.n("consent_version") != Some(room.consent_version as i64) {
                return Err(ApiError::ConsentRequired);
            }
            if let Some(slot) = &got[3] {
                return self.existing_run_binding(p, slot, room_id.as_str()).await.map(|v| (false, v));
            }
            let binding_ref = RunBindingRef::generate();
            let now = rfc3339(self.room_now());
            let slot = Item::new(sk.pk.clone(), sk.sk.clone())
                .with_s("binding_ref", binding_ref.as_str())
                .with_s("room_id", room_id.as_str())
                .with_s("owner_hash", p.owner_hash());
            let bk = bind_key(binding_ref.as_str());
            let binding = Item::new(bk.pk, bk.sk)
                .with_s("kind", KIND_RUN_ROOM)
                .with_s("owner_hash", p.owner_hash())
                .with_s("status", "active")
                .with_s("run_id", run_id.as_str())
                .with_s("room_id", room_id.as_str())
                .with_s("role", member.s("role").unwrap_or("member"))
                .with_n("consent_version", room.consent_version as i64)
                .with_s("consent_receipt", member.s("consent_receipt").unwrap_or_default())
                .with_s("created_at", &now);
            let ops = vec![
                WriteOp::Put { item: slot, cond: Some(Cond::NotExists) },
                WriteOp::Put { item: binding, cond: Some(Cond::NotExists) },
                WriteOp::Check { key: run_key(&run.run_id), cond: Cond::eq_s("owner_hash", p.owner_hash()) },
                WriteOp::Check { key: mk.clone(), cond: Cond::eq_n("consent_version", room.consent_version as i64) },
            ];
            match self.store.transact(ops).await {
                Ok(()) => {
                    let receipt = RunBindingReceipt {
                        schema: RunBindingSchemaName,
                        binding_ref: binding_ref.to_string(),
                        binding_status: BindingStatus::Active,
                        room_id: room_id.to_string(),
                        run_id: run_id.to_string(),
                        created_at: now,
                        flags: FalseFlags::default(),
                    };
                    return Ok((true, project(&receipt)?));
                }
                Err(e) if failed(&e, 2) || failed(&e, 3) => return Err(ApiError::NotFound),
                // The slot was taken (or the write contended): re-read and answer from it.
                Err(e) if failed(&e, 0) || contended(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The answer to a bind whose run already holds an active binding.
    async fn existing_run_binding(&self, p: &Caller, slot: &Item, room_id: &str) -> Result<Value, ApiError> {
        if slot.s("owner_hash") != Some(p.owner_hash().as_str()) || slot.s("room_id") != Some(room_id) {
            return Err(ApiError::RunAlreadyBound);
        }
        let binding_ref = slot.s("binding_ref").ok_or_else(|| broken("slot without binding"))?;
        let b =
            binding_of(self.store.get(&bind_key(binding_ref)).await?.ok_or_else(|| broken("slot without binding"))?);
        if b.status != "active" {
            return Err(ApiError::RunAlreadyBound);
        }
        project(&RunBindingReceipt {
            schema: RunBindingSchemaName,
            binding_ref: binding_ref.to_owned(),
            binding_status: BindingStatus::Active,
            room_id: room_id.to_owned(),
            run_id: b.run_id,
            created_at: b.created_at,
            flags: FalseFlags::default(),
        })
    }

    /// `DELETE /api/v1/rooms/run-bindings/{binding_ref}`: the owner's cleanup escape hatch
    /// (works under the policy lock).
    pub async fn unbind_run(&self, p: &Caller, binding_ref: &str) -> Result<Value, ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let r = RunBindingRef::parse(binding_ref).ok_or(ApiError::NotFound)?;
        self.withdraw(p, r.as_str(), KIND_RUN_ROOM).await
    }

    /// `DELETE /api/v1/rooms/chat-bindings/{binding_ref}`: likewise for a claimed chat.
    pub async fn unbind_chat(&self, p: &Caller, binding_ref: &str) -> Result<Value, ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let r = ChatBindingRef::parse(binding_ref).ok_or(ApiError::NotFound)?;
        self.withdraw(p, r.as_str(), KIND_RUN_CHAT).await
    }

    /// Marks the binding revoked (permanent) and frees its run's slot, in one transaction.
    async fn withdraw(&self, p: &Caller, binding_ref: &str, kind: &str) -> Result<Value, ApiError> {
        let bk = bind_key(binding_ref);
        for _ in 0..RACE_RETRIES {
            let item = self.store.get(&bk).await?.ok_or(ApiError::NotFound)?;
            let b = binding_of(item);
            // Another owner's binding is indistinguishable from a missing one.
            if b.owner_hash != p.owner_hash() || b.kind != kind {
                return Err(ApiError::NotFound);
            }
            if b.status != "active" {
                return project(&revocation(binding_ref, RevocationStatus::AlreadyRevoked));
            }
            let ops = self.room_revoke_ops(&b, binding_ref)?;
            match self.store.transact(ops).await {
                Ok(()) => return project(&revocation(binding_ref, RevocationStatus::Revoked)),
                Err(e) if failed(&e, 0) || contended(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The two actions of a revocation: the binding marked revoked (guarded on being
    /// active) and its slot deleted (guarded on still naming this binding).
    fn room_revoke_ops(&self, b: &Binding, binding_ref: &str) -> Result<Vec<WriteOp>, ApiError> {
        let mut revoked = b.item.clone();
        revoked.attrs.insert("status".into(), crate::store::Attr::S("revoked".into()));
        revoked.attrs.insert("revoked_at".into(), crate::store::Attr::S(rfc3339(self.room_now())));
        let slot = if b.kind == KIND_RUN_ROOM { run_room_slot(&b.run_id) } else { run_chat_slot(&b.run_id) };
        Ok(vec![
            WriteOp::Put { item: revoked, cond: Some(Cond::eq_s("status", "active")) },
            // A slot naming another binding is never deleted; a missing slot does not block
            // the owner's cleanup.
            WriteOp::Delete {
                key: slot,
                cond: Some(Cond::Or(vec![Cond::NotExists, Cond::eq_s("binding_ref", binding_ref)])),
            },
        ])
    }

    // ---------- chat claims ----------

    /// `POST /api/v1/rooms/chat-bindings/claim`: consumes the browser-issued handle once
    /// (conditional delete) for the same linked account and the caller's exact run, and
    /// creates the run-chat binding in the same transaction. A reused, expired or foreign
    /// handle is one error, `claim_handle_invalid`.
    pub async fn claim_chat(&self, p: &Caller, req: ChatClaimRequest) -> Result<Value, ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let handle = ClaimHandle::parse(&req.claim_handle).ok_or(ApiError::ClaimHandleInvalid)?;
        let run_id = body_run_id(&req.run_id)?;
        check_principal(p)?;
        let ck = claim_key(&handle.hash());
        let sk = run_chat_slot(run_id.as_str());
        for _ in 0..RACE_RETRIES {
            let got = self.store.batch_get(&[ck.clone(), run_key(run_id.as_str()), sk.clone()]).await?;
            let now = self.clock.epoch();
            let claim =
                got[0].as_ref().filter(|c| c.s("account_id") == Some(p.account_id.as_str()) && !c.is_expired(now));
            let claim = claim.ok_or(ApiError::ClaimHandleInvalid)?;
            let run = owned_run(p, got[1].as_ref())?;
            if got[2].is_some() {
                return Err(ApiError::RunAlreadyBound);
            }
            let mut obs: ObserverRecord =
                serde_json::from_str(claim.s(BODY).unwrap_or_default()).map_err(ApiError::internal)?;
            if obs.status != "awaiting_claim" {
                return Err(ApiError::ClaimHandleInvalid);
            }
            let binding_ref = ChatBindingRef::generate();
            let now = rfc3339(self.room_now());
            obs.status = "bound".into();
            obs.binding_ref = Some(binding_ref.to_string());
            obs.run_id = Some(run.run_id.clone());
            let slot = Item::new(sk.pk.clone(), sk.sk.clone())
                .with_s("binding_ref", binding_ref.as_str())
                .with_s("owner_hash", p.owner_hash());
            let bk = bind_key(binding_ref.as_str());
            let binding = Item::new(bk.pk, bk.sk)
                .with_s("kind", KIND_RUN_CHAT)
                .with_s("owner_hash", p.owner_hash())
                .with_s("status", "active")
                .with_s("run_id", &run.run_id)
                .with_s("observer_ref", &obs.observer_ref)
                .with_s("created_at", &now);
            let ops = vec![
                WriteOp::Delete {
                    key: ck.clone(),
                    cond: Some(Cond::And(vec![Cond::Exists, Cond::eq_s("account_id", p.account_id.clone())])),
                },
                WriteOp::Put { item: slot, cond: Some(Cond::NotExists) },
                WriteOp::Put { item: binding, cond: Some(Cond::NotExists) },
                WriteOp::Put { item: observer_item(&obs)?, cond: Some(Cond::eq_s("status", "awaiting_claim")) },
                WriteOp::Check { key: run_key(&run.run_id), cond: Cond::eq_s("owner_hash", p.owner_hash()) },
            ];
            match self.store.transact(ops).await {
                Ok(()) => {
                    return project(&ChatBindingReceipt {
                        schema: ChatBindingSchemaName,
                        binding_ref: binding_ref.to_string(),
                        binding_status: BindingStatus::Active,
                        run_id: run.run_id,
                        snapshot_ref: obs.snapshot_ref,
                        snapshot_message_count: obs.snapshot_message_count,
                        snapshot_char_count: obs.snapshot_char_count,
                        chat_id_included: false,
                        created_at: now,
                        flags: FalseFlags::default(),
                    });
                }
                // Consumed by someone else, or the browser disconnected meanwhile.
                Err(e) if failed(&e, 0) || failed(&e, 3) => return Err(ApiError::ClaimHandleInvalid),
                Err(e) if failed(&e, 4) => return Err(ApiError::NotFound),
                Err(e) if failed(&e, 1) || contended(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    // ---------- the observer lane (cookie) ----------

    /// `POST /api/agi/agent-run-observer/bindings`: a signed-in, non-guest browser issues a
    /// show-once claim handle for a chat it selected; the snapshot is redacted before storage.
    pub async fn create_observer(&self, s: &Session, req: ObserverRequest) -> Result<ObserverCreated, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let snapshot = req.validate()?;
        let now = self.room_now();
        let observer_ref = ObserverRef::generate();
        let handle = ClaimHandle::generate();
        let expires = now.timestamp() + CLAIM_TTL_SECS;
        let chars: usize = snapshot.iter().map(|m| m.content.chars().count()).sum();
        let redacted = snapshot.iter().zip(&req.snapshot).any(|(a, b)| a.content != b.content);
        let obs = ObserverRecord {
            observer_ref: observer_ref.to_string(),
            account_id: s.account_id.clone(),
            chat_hash: req.chat_hash(&s.account_id),
            claim_hash: handle.hash(),
            status: "awaiting_claim".into(),
            binding_ref: None,
            run_id: None,
            snapshot_ref: (!snapshot.is_empty()).then(|| crate::domain::room::snapshot_ref(observer_ref.as_str())),
            snapshot_message_count: snapshot.len() as u32,
            snapshot_char_count: chars as u32,
            created_at: now,
            claim_expires_at: expires,
        };
        let ck = claim_key(&obs.claim_hash);
        let obs_body = serde_json::to_string(&obs).map_err(ApiError::internal)?;
        let claim = Item::new(ck.pk, ck.sk)
            .with_s("account_id", &s.account_id)
            .with_s("observer_ref", observer_ref.as_str())
            .with_s(BODY, obs_body)
            .with_n(EXPIRES_AT, expires);
        let mut ops = vec![
            WriteOp::Put { item: claim, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: observer_item(&obs)?, cond: Some(Cond::NotExists) },
        ];
        if !snapshot.is_empty() {
            let k = snapshot_key(observer_ref.as_str());
            let text = serde_json::to_string(&snapshot).map_err(ApiError::internal)?;
            ops.push(WriteOp::Put { item: Item::new(k.pk, k.sk).with_s(BODY, text), cond: Some(Cond::NotExists) });
        }
        self.store.transact(ops).await?;
        Ok(ObserverCreated {
            schema: OBSERVER_CREATED_SCHEMA,
            observer_binding_ref: observer_ref.to_string(),
            claim_handle: handle.expose().to_owned(),
            expires_at: epoch_rfc3339(expires),
            snapshot_message_count: obs.snapshot_message_count,
            snapshot_redacted: redacted,
            flags: FalseFlags::default(),
        })
    }

    /// The session's own observer (another account's is not found).
    async fn own_observer(&self, s: &Session, observer_ref: &str) -> Result<ObserverRecord, ApiError> {
        let r = ObserverRef::parse(observer_ref).ok_or(ApiError::NotFound)?;
        let item = self.store.get(&observer_key(r.as_str())).await?.ok_or(ApiError::NotFound)?;
        let obs = observer_of(&item)?;
        if obs.account_id != s.account_id {
            return Err(ApiError::NotFound);
        }
        Ok(obs)
    }

    /// The observer, its binding and its run (when claimed), in one read after the observer.
    async fn observer_state(&self, obs: &ObserverRecord) -> Result<(Option<Binding>, Option<Run>), ApiError> {
        let (Some(binding_ref), Some(run_id)) = (&obs.binding_ref, &obs.run_id) else { return Ok((None, None)) };
        let got = self.store.batch_get(&[bind_key(binding_ref), run_key(run_id)]).await?;
        let binding = got[0].clone().map(binding_of);
        let run = got[1].as_ref().map(run_from_item).transpose()?;
        Ok((binding, run))
    }

    fn observer_status(&self, obs: &ObserverRecord, binding: Option<&Binding>) -> ObserverStatus {
        match obs.status.as_str() {
            "disconnected" => ObserverStatus::Disconnected,
            "bound" if binding.is_some_and(|b| b.status == "active") => ObserverStatus::Bound,
            "bound" => ObserverStatus::Revoked,
            _ if obs.claim_expires_at <= self.clock.epoch() => ObserverStatus::Expired,
            _ => ObserverStatus::AwaitingClaim,
        }
    }

    /// `GET /api/agi/agent-run-observer/bindings/{ref}`: status and the terminal message,
    /// which exists only for a bound run whose canonical terminal product was authorized.
    pub async fn observer(&self, s: &Session, observer_ref: &str) -> Result<Value, ApiError> {
        unlocked(s.policy.rooms_locked)?;
        let obs = self.own_observer(s, observer_ref).await?;
        let (binding, run) = self.observer_state(&obs).await?;
        let status = self.observer_status(&obs, binding.as_ref());
        let visible = matches!(status, ObserverStatus::Bound | ObserverStatus::Revoked);
        let run = run.filter(|_| visible);
        let terminal_message = run.as_ref().and_then(|r| terminal_message(&obs.observer_ref, r));
        project(&ObserverView {
            schema: OBSERVER_SCHEMA,
            observer_binding_ref: obs.observer_ref.clone(),
            binding_status: status,
            lifecycle_status: run.as_ref().and_then(|r| enum_name(&r.lifecycle_status)),
            completion_status: run.as_ref().and_then(|r| enum_name(&r.completion_status)),
            terminal_message,
            created_at: rfc3339(obs.created_at),
            claim_expires_at: epoch_rfc3339(obs.claim_expires_at),
        })
    }

    /// `GET …/events?after_seq&limit`: progress receipts of the bound run (kind, seq, time;
    /// never event data or chat messages). Empty until claimed and after withdrawal.
    pub async fn observer_events(
        &self,
        s: &Session,
        observer_ref: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Value, ApiError> {
        unlocked(s.policy.rooms_locked)?;
        if !(1..=200).contains(&limit) {
            return Err(ApiError::InvalidRequest("limit: must be 1-200".into()));
        }
        let obs = self.own_observer(s, observer_ref).await?;
        let mut page = ObserverEventPage {
            schema: OBSERVER_EVENTS_SCHEMA,
            observer_binding_ref: obs.observer_ref.clone(),
            receipts: vec![],
            next_after_seq: after_seq,
            has_more: false,
        };
        if let (Some(binding_ref), Some(run_id), "bound") = (&obs.binding_ref, &obs.run_id, obs.status.as_str()) {
            let b = self.store.get(&bind_key(binding_ref)).await?.map(binding_of);
            if b.is_some_and(|b| b.status == "active") {
                let after = (after_seq > 0).then(|| super::records::event_sk(after_seq));
                let got = self.store.query(&run_key(run_id).pk, "EVT#", after.as_deref(), limit as usize).await?;
                for item in &got.items {
                    let e = event_from_item(item)?;
                    page.receipts.push(ProgressReceipt {
                        seq: e.seq,
                        kind: enum_name(&e.kind()).unwrap_or_default(),
                        at: rfc3339(e.created_at),
                        flags: FalseFlags::default(),
                    });
                }
                page.next_after_seq = page.receipts.last().map(|r| r.seq).unwrap_or(after_seq);
                page.has_more = got.has_more;
            }
        }
        project(&page)
    }

    /// `DELETE /api/agi/agent-run-observer/bindings/{ref}`: the browser disconnects (works
    /// under the policy lock). An unclaimed handle dies with it; a claimed chat binding
    /// is revoked and its slot freed, in the same transaction.
    pub async fn disconnect_observer(&self, s: &Session, observer_ref: &str) -> Result<Value, ApiError> {
        for _ in 0..RACE_RETRIES {
            let mut obs = self.own_observer(s, observer_ref).await?;
            if obs.status == "disconnected" {
                return project(&disconnect(&obs.observer_ref, "already_disconnected"));
            }
            let previous = obs.status.clone();
            let (binding, _) = self.observer_state(&obs).await?;
            obs.status = "disconnected".into();
            let mut ops = vec![WriteOp::Put { item: observer_item(&obs)?, cond: Some(Cond::eq_s("status", previous)) }];
            match (&binding, &obs.binding_ref) {
                (Some(b), Some(r)) if b.status == "active" => ops.extend(self.room_revoke_ops(b, r)?),
                _ => ops.push(WriteOp::Delete { key: claim_key(&obs.claim_hash), cond: None }),
            }
            match self.store.transact(ops).await {
                Ok(()) => return project(&disconnect(&obs.observer_ref, "disconnected")),
                Err(StoreError::TransactionCanceled { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}

fn disconnect(observer_ref: &str, status: &'static str) -> ObserverDisconnect {
    ObserverDisconnect {
        schema: OBSERVER_DISCONNECT_SCHEMA,
        observer_binding_ref: observer_ref.to_owned(),
        binding_status: ObserverStatus::Disconnected,
        disconnect_status: status,
    }
}

/// The snake_case wire name of a serialisable enum value.
fn enum_name(v: &impl Serialize) -> Option<String> {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned))
}

/// Exactly one assistant message, only from the verified canonical terminal product of a
/// completed run with authorized terminal authority; never from events, receipts,
/// evidence or an unverified candidate.
fn terminal_message(observer_ref: &str, run: &Run) -> Option<TerminalMessage> {
    if run.completion_status != Completion::Completed || run.terminal_authority_status != Authority::Authorized {
        return None;
    }
    let product = run.latest_result.as_ref()?.terminal_product.as_ref()?;
    if crate::domain::sha256_hex(&product.text) != product.text_sha256 {
        return None;
    }
    Some(TerminalMessage {
        id: terminal_message_id(observer_ref, &run.run_id, &product.text_sha256),
        role: "assistant",
        content: redact_text(&product.text),
        terminal_authority_status: "authorized",
    })
}

// ---------- members, consent and invites (the browser lane) ----------

/// How long an invite code stays usable.
pub const INVITE_TTL_SECS: i64 = 7 * 24 * 3600;
/// How many members one room lists.
pub const MAX_MEMBERS: usize = 100;

/// An invite, by the hash of its show-once code (TTL; consumed by a conditional delete).
pub fn invite_key(code_hash: &str) -> Key {
    Key::new(format!("INVITE#{code_hash}"), "INVITE")
}

/// The durable consent receipt of one member for one consent version.
pub fn consent_key(room_id: &str, account_id: &str, version: u32) -> Key {
    Key::new(format!("ROOM#{room_id}"), format!("CONSENT#{account_id}#{version:010}"))
}

fn consent_receipt_ref(room_id: &str, account_id: &str, version: u32) -> String {
    format!("consent_{}", &hash_parts(&["room-consent.v1", room_id, account_id, &version.to_string()])[..24])
}

/// One member as the owner sees it (an opaque account reference, never an identity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    pub account_ref: String,
    pub role: RoomRole,
    pub consent_current: bool,
    pub is_caller: bool,
}

/// One room on the owner page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoomAdminView {
    pub room: RoomView,
    /// Listed for the owner only.
    pub members: Vec<MemberView>,
}

/// What an invite code leads to, shown before the invitee accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvitePreview {
    pub room_name: String,
    pub consent_version: u32,
}

impl Services {
    async fn room_and_member(&self, room_id: &str, account_id: &str) -> Result<(RoomRecord, Item), ApiError> {
        let id = RoomId::parse(room_id).ok_or(ApiError::NotFound)?;
        let got = self.store.batch_get(&[room_key(id.as_str()), member_key(id.as_str(), account_id)]).await?;
        let (Some(room), Some(member)) = (&got[0], &got[1]) else { return Err(ApiError::NotFound) };
        let room = room_of(room)?;
        if room.status != "active" {
            return Err(ApiError::NotFound);
        }
        Ok((room, member.clone()))
    }

    /// The owner's room and the caller's membership; a non-owner is not found.
    async fn owned_room(&self, s: &Session, room_id: &str) -> Result<(RoomRecord, Item), ApiError> {
        let (room, member) = self.room_and_member(room_id, &s.account_id).await?;
        if room.owner_account != s.account_id {
            return Err(ApiError::NotFound);
        }
        Ok((room, member))
    }

    /// The rooms of a signed-in browser, with the member list of each room it owns.
    pub async fn rooms_for_session(&self, s: &Session) -> Result<Vec<RoomAdminView>, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let page = self.store.query(&format!("ACCOUNT#{}", s.account_id), "ROOM#", None, MAX_LISTED_ROOMS).await?;
        let ids: Vec<String> = page.items.iter().filter_map(|i| i.s("room_id").map(str::to_owned)).collect();
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let keys: Vec<Key> = ids.iter().flat_map(|id| [room_key(id), member_key(id, &s.account_id)]).collect();
        let got = self.store.batch_get(&keys).await?;
        let mut out = vec![];
        for pair in got.chunks(2) {
            let [Some(room), Some(member)] = pair else { continue };
            let room = room_of(room)?;
            if room.status != "active" {
                continue;
            }
            let mut members = vec![];
            if room.owner_account == s.account_id {
                let page = self.store.query(&room_key(&room.room_id).pk, "MEM#", None, MAX_MEMBERS).await?;
                for m in &page.items {
                    let account_id = m.sk.trim_start_matches("MEM#");
                    members.push(MemberView {
                        account_ref: crate::domain::account::account_ref(account_id),
                        role: if m.s("role") == Some("owner") { RoomRole::Owner } else { RoomRole::Member },
                        consent_current: m.n("consent_version") == Some(room.consent_version as i64),
                        is_caller: account_id == s.account_id,
                    });
                }
            }
            out.push(RoomAdminView { room: room_view(&room, member, &s.account_id), members });
        }
        Ok(out)
    }

    /// The owner issues a single-use, expiring invite; the code is shown once and stored hashed.
    pub async fn create_invite(&self, s: &Session, room_id: &str) -> Result<(String, String), ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (room, _) = self.owned_room(s, room_id).await?;
        let code = format!("hri_{}", crate::domain::random_hex(32));
        let expires = self.clock.epoch() + INVITE_TTL_SECS;
        let k = invite_key(&hash_parts(&["room-invite.v1", &code]));
        let item = Item::new(k.pk, k.sk)
            .with_s("room_id", &room.room_id)
            .with_s("created_by", &s.account_id)
            .with_n(EXPIRES_AT, expires);
        self.store.put(item, Some(Cond::NotExists)).await?;
        Ok((code, epoch_rfc3339(expires)))
    }

    async fn live_invite(&self, code: &str) -> Result<(Key, RoomRecord), ApiError> {
        let valid =
            code.strip_prefix("hri_").is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        if !valid {
            return Err(ApiError::InviteInvalid);
        }
        let k = invite_key(&hash_parts(&["room-invite.v1", code]));
        let invite = self.store.get(&k).await?.filter(|i| !i.is_expired(self.clock.epoch()));
        let invite = invite.ok_or(ApiError::InviteInvalid)?;
        let room_id = invite.s("room_id").ok_or(ApiError::InviteInvalid)?;
        let room = self.store.get(&room_key(room_id)).await?.ok_or(ApiError::InviteInvalid)?;
        let room = room_of(&room)?;
        if room.status != "active" {
            return Err(ApiError::InviteInvalid);
        }
        Ok((k, room))
    }

    /// What the invitee is about to accept (room name and current consent version).
    pub async fn preview_invite(&self, s: &Session, code: &str) -> Result<InvitePreview, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (_, room) = self.live_invite(code).await?;
        Ok(InvitePreview { room_name: room.name, consent_version: room.consent_version })
    }

    /// A signed-in invitee accepts the room's current consent version: one transaction
    /// consumes the invite, writes the membership, the durable consent receipt and the
    /// listing entry, and checks the room still has that consent version.
    pub async fn accept_invite(&self, s: &Session, code: &str, consent_version: u32) -> Result<String, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (ik, room) = self.live_invite(code).await?;
        if consent_version != room.consent_version {
            return Err(ApiError::ConsentRequired);
        }
        let now = rfc3339(self.room_now());
        let receipt = consent_receipt_ref(&room.room_id, &s.account_id, consent_version);
        let mk = member_key(&room.room_id, &s.account_id);
        let member = Item::new(mk.pk, mk.sk)
            .with_s("role", "member")
            .with_n("consent_version", consent_version as i64)
            .with_s("consent_receipt", &receipt)
            .with_s("accepted_at", &now);
        let ck = consent_key(&room.room_id, &s.account_id, consent_version);
        let consent = Item::new(ck.pk, ck.sk).with_s("consent_receipt", &receipt).with_s("accepted_at", &now);
        let ek = account_room_key(&s.account_id, &room.room_id);
        let ops = vec![
            WriteOp::Delete { key: ik, cond: Some(Cond::Exists) },
            WriteOp::Put { item: member, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: consent, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: Item::new(ek.pk, ek.sk).with_s("room_id", &room.room_id), cond: None },
            WriteOp::Check {
                key: room_key(&room.room_id),
                cond: Cond::eq_n("consent_version", consent_version as i64),
            },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(room.room_id),
            Err(e) if failed(&e, 0) => Err(ApiError::InviteInvalid),
            Err(e) if failed(&e, 1) || failed(&e, 2) => {
                Err(ApiError::InvalidRequest("this account is already a member of the room".into()))
            }
            Err(e) if failed(&e, 4) => Err(ApiError::ConsentRequired),
            Err(e) => Err(e.into()),
        }
    }

    /// A member accepts the room's current consent version again (after the owner raised it).
    pub async fn accept_consent(&self, s: &Session, room_id: &str, consent_version: u32) -> Result<(), ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (room, member) = self.room_and_member(room_id, &s.account_id).await?;
        if consent_version != room.consent_version {
            return Err(ApiError::ConsentRequired);
        }
        let now = rfc3339(self.room_now());
        let receipt = consent_receipt_ref(&room.room_id, &s.account_id, consent_version);
        let mut updated = member.clone();
        updated.attrs.insert("consent_version".into(), crate::store::Attr::N(consent_version as i64));
        updated.attrs.insert("consent_receipt".into(), crate::store::Attr::S(receipt.clone()));
        updated.attrs.insert("accepted_at".into(), crate::store::Attr::S(now.clone()));
        let ck = consent_key(&room.room_id, &s.account_id, consent_version);
        let ops = vec![
            WriteOp::Put { item: updated, cond: Some(Cond::Exists) },
            WriteOp::Put {
                item: Item::new(ck.pk, ck.sk).with_s("consent_receipt", &receipt).with_s("accepted_at", &now),
                cond: None,
            },
            WriteOp::Check {
                key: room_key(&room.room_id),
                cond: Cond::eq_n("consent_version", consent_version as i64),
            },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(()),
            Err(e) if failed(&e, 0) => Err(ApiError::NotFound),
            Err(e) if failed(&e, 2) => Err(ApiError::ConsentRequired),
            Err(e) => Err(e.into()),
        }
    }

    /// The owner raises the consent version: every other member must accept again before
    /// their next bind (the owner's own acceptance is written in the same transaction).
    pub async fn raise_consent(&self, s: &Session, room_id: &str) -> Result<u32, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let (mut room, member) = self.owned_room(s, room_id).await?;
        let old = room.consent_version;
        room.consent_version = old + 1;
        let rk = room_key(&room.room_id);
        let room_item = Item::new(rk.pk, rk.sk)
            .with_s("owner_account", &room.owner_account)
            .with_s("status", &room.status)
            .with_n("consent_version", room.consent_version as i64)
            .with_s(BODY, serde_json::to_string(&room).map_err(ApiError::internal)?);
        let now = rfc3339(self.room_now());
        let receipt = consent_receipt_ref(&room.room_id, &s.account_id, room.consent_version);
        let mut owner = member;
        owner.attrs.insert("consent_version".into(), crate::store::Attr::N(room.consent_version as i64));
        owner.attrs.insert("consent_receipt".into(), crate::store::Attr::S(receipt.clone()));
        let ck = consent_key(&room.room_id, &s.account_id, room.consent_version);
        let ops = vec![
            WriteOp::Put { item: room_item, cond: Some(Cond::eq_n("consent_version", old as i64)) },
            WriteOp::Put { item: owner, cond: Some(Cond::Exists) },
            WriteOp::Put {
                item: Item::new(ck.pk, ck.sk).with_s("consent_receipt", &receipt).with_s("accepted_at", &now),
                cond: None,
            },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(room.consent_version),
            Err(StoreError::TransactionCanceled { .. }) => Err(ApiError::RunBusy),
            Err(e) => Err(e.into()),
        }
    }

    /// The owner removes a member (by opaque account reference). Works under the policy
    /// lock: it only takes access away.
    pub async fn remove_member(&self, s: &Session, room_id: &str, member_ref: &str) -> Result<(), ApiError> {
        let (room, _) = self.owned_room(s, room_id).await?;
        let page = self.store.query(&room_key(&room.room_id).pk, "MEM#", None, MAX_MEMBERS).await?;
        let target = page
            .items
            .iter()
            .map(|m| m.sk.trim_start_matches("MEM#").to_owned())
            .find(|a| crate::domain::account::account_ref(a) == member_ref && *a != room.owner_account)
            .ok_or(ApiError::NotFound)?;
        let ops = vec![
            WriteOp::Delete { key: member_key(&room.room_id, &target), cond: Some(Cond::Exists) },
            WriteOp::Delete { key: account_room_key(&target, &room.room_id), cond: None },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(()),
            Err(e) if failed(&e, 0) => Err(ApiError::NotFound),
            Err(e) => Err(e.into()),
        }
    }
}
