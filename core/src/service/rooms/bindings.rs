//! Run-room bindings over the bearer lane: bind (one active binding per run, a
//! conditional put on the run's slot), and the withdrawals of run-room and claimed
//! run-chat bindings (marked revoked, never deleted; the slot freed in the same
//! transaction). Must not depend on `http` or `mcp`.

use super::{
    RACE_RETRIES, Redacted, RoomService, body_room_id, body_run_id, check_principal, owned_run, room_tenant, rules,
};
use crate::domain::room::{
    BindingStatus, ChatBindingRef, FalseFlags, RevocationReceipt, RevocationSchemaName, RevocationStatus,
    RunBindingReceipt, RunBindingRef, RunBindingRequest, RunBindingSchemaName,
};
use crate::domain::scopes::{ROOMS_MANAGE, RUNS_WRITE};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::rooms::{self as items, Binding, BindingKind, BindingState, BindingTarget, RunRoomSlot};
use crate::service::records::{Role, Tx, run_key};
use crate::store::Cond;

fn revocation(binding_ref: &str, status: RevocationStatus) -> Redacted<RevocationReceipt> {
    Redacted::new(RevocationReceipt {
        schema: RevocationSchemaName,
        binding_ref: binding_ref.to_owned(),
        binding_status: BindingStatus::Revoked,
        revocation_status: status,
        flags: FalseFlags::default(),
    })
}

impl RoomService {
    /// `POST /api/v1/rooms/run-bindings`: one active binding per run (a conditional put
    /// on the run's slot); an exact retry returns the existing binding (200), binding the
    /// run to another room is `run_already_bound`. Returns (created, receipt).
    pub async fn bind_run(
        &self,
        p: &Caller,
        req: RunBindingRequest,
    ) -> Result<(bool, Redacted<RunBindingReceipt>), ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let run_id = body_run_id(&req.run_id)?;
        let room_id = body_room_id(&req.room_id)?;
        check_principal(p)?;
        for _ in 0..RACE_RETRIES {
            let got = items::bind_reads(&*self.store, run_id.as_str(), room_id.as_str(), &p.account_id).await?;
            let run = owned_run(p, got.run)?;
            let (room, member) = rules::visible(rules::of_tenant(&room_tenant(p), got.room), got.member)?;
            rules::may_bind(&room, &member)?;
            if let Some(slot) = &got.slot {
                return self.existing_run_binding(p, slot, room_id.as_str()).await.map(|v| (false, v));
            }
            let binding_ref = RunBindingRef::generate();
            let now = rfc3339(self.clock.now());
            let slot = RunRoomSlot {
                run_id: run_id.to_string(),
                binding_ref: binding_ref.to_string(),
                room_id: room_id.to_string(),
                owner_hash: p.owner_hash(),
            };
            let binding = Binding {
                owner_hash: p.owner_hash(),
                state: BindingState::Active,
                run_id: run_id.to_string(),
                created_at: now.clone(),
                revoked_at: None,
                target: BindingTarget::Room {
                    room_id: room_id.to_string(),
                    role: member.role,
                    consent_version: room.consent_version,
                    consent_receipt: member.consent_receipt.clone(),
                },
            };
            let mut tx = Tx::new();
            tx.put(Role::Slot, slot.to_item(), Cond::NotExists)
                .put(Role::Binding, binding.to_item(binding_ref.as_str()), Cond::NotExists)
                .check(
                    Role::RunOwner,
                    run_key(&run.run_id),
                    crate::service::records::runs::owned_by_cond(&p.owner_hash()),
                )
                .check(
                    Role::Member,
                    items::member_key(room_id.as_str(), &p.account_id),
                    items::consent_is(room.consent_version),
                );
            match tx.commit(&*self.store).await {
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
                    return Ok((true, Redacted::new(receipt)));
                }
                Err(f) if f.failed(Role::RunOwner) || f.failed(Role::Member) => return Err(ApiError::NotFound),
                // The slot was taken (or the write contended): re-read and answer from it.
                Err(f) if f.failed(Role::Slot) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The answer to a bind whose run already holds an active binding.
    async fn existing_run_binding(
        &self,
        p: &Caller,
        slot: &RunRoomSlot,
        room_id: &str,
    ) -> Result<Redacted<RunBindingReceipt>, ApiError> {
        rules::retry_of(slot, &p.owner_hash(), room_id)?;
        let b = items::read_binding(&*self.store, &slot.binding_ref).await?;
        let b = b.ok_or_else(|| super::broken("slot without binding"))?;
        if !b.is_active() {
            return Err(ApiError::RunAlreadyBound);
        }
        Ok(Redacted::new(RunBindingReceipt {
            schema: RunBindingSchemaName,
            binding_ref: slot.binding_ref.clone(),
            binding_status: BindingStatus::Active,
            room_id: room_id.to_owned(),
            run_id: b.run_id,
            created_at: b.created_at,
            flags: FalseFlags::default(),
        }))
    }

    /// `DELETE /api/v1/rooms/run-bindings/{binding_ref}`: the owner's cleanup escape hatch
    /// (works under the policy lock).
    pub async fn unbind_run(&self, p: &Caller, binding_ref: &str) -> Result<Redacted<RevocationReceipt>, ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let r = RunBindingRef::parse(binding_ref).ok_or(ApiError::NotFound)?;
        self.withdraw(p, r.as_str(), BindingKind::RunRoom).await
    }

    /// `DELETE /api/v1/rooms/chat-bindings/{binding_ref}`: likewise for a claimed chat.
    pub async fn unbind_chat(&self, p: &Caller, binding_ref: &str) -> Result<Redacted<RevocationReceipt>, ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let r = ChatBindingRef::parse(binding_ref).ok_or(ApiError::NotFound)?;
        self.withdraw(p, r.as_str(), BindingKind::RunChat).await
    }

    /// Marks the binding revoked (permanent) and frees its run's slot, in one transaction.
    async fn withdraw(
        &self,
        p: &Caller,
        binding_ref: &str,
        kind: BindingKind,
    ) -> Result<Redacted<RevocationReceipt>, ApiError> {
        for _ in 0..RACE_RETRIES {
            let b = items::read_binding(&*self.store, binding_ref).await?.ok_or(ApiError::NotFound)?;
            rules::may_withdraw(&b, &p.owner_hash(), kind)?;
            if !b.is_active() {
                return Ok(revocation(binding_ref, RevocationStatus::AlreadyRevoked));
            }
            let mut tx = Tx::new();
            self.revoke(&mut tx, b, binding_ref);
            match tx.commit(&*self.store).await {
                Ok(()) => return Ok(revocation(binding_ref, RevocationStatus::Revoked)),
                Err(f) if f.failed(Role::Binding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }

    pub(super) fn revoke(&self, tx: &mut Tx, b: Binding, binding_ref: &str) {
        revoke_binding(tx, b, binding_ref, self.clock.now());
    }
}

/// The two actions of a revocation: the binding marked revoked (guarded on being active)
/// and its slot deleted (guarded on still naming this binding, so a slot another binding
/// holds is never freed). Also what an approved turn's withdrawal adds to its finalize.
pub(crate) fn revoke_binding(tx: &mut Tx, mut b: Binding, binding_ref: &str, now: chrono::DateTime<chrono::Utc>) {
    let slot = b.slot_key();
    b.state = BindingState::Revoked;
    b.revoked_at = Some(rfc3339(now));
    tx.put(Role::Binding, b.to_item(binding_ref), items::binding_active()).delete(
        Role::Slot,
        slot,
        items::slot_free_or_held_by(binding_ref),
    );
}
