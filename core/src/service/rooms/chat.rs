//! Claimed run-chat bindings over the bearer lane: the agent consumes the handle a
//! signed-in browser issued, once, for the same linked account and its own run.
//! Must not depend on `http` or `mcp`.

use super::{RACE_RETRIES, Redacted, RoomService, body_run_id, check_principal, owned_run, room_tenant, rules};
use crate::domain::room::{
    BindingStatus, ChatBindingReceipt, ChatBindingRef, ChatBindingSchemaName, ChatClaimRequest, ClaimHandle, FalseFlags,
};
use crate::domain::scopes::{ROOMS_MANAGE, RUNS_WRITE};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::rooms::{self as items, Binding, BindingState, BindingTarget, ObserverState, RunChatSlot};
use crate::service::records::{Role, Tx, run_key};
use crate::store::Cond;

impl RoomService {
    /// `POST /api/v1/rooms/chat-bindings/claim`: consumes the browser-issued handle once
    /// (conditional delete) for the same linked account and the caller's exact run, and
    /// creates the run-chat binding in the same transaction. A reused, expired or foreign
    /// handle (another account's, or issued by a browser signed in under another tenant)
    /// is one error, `claim_handle_invalid`.
    pub async fn claim_chat(
        &self,
        p: &Caller,
        req: ChatClaimRequest,
    ) -> Result<Redacted<ChatBindingReceipt>, ApiError> {
        p.require(&[ROOMS_MANAGE, RUNS_WRITE])?;
        let handle = ClaimHandle::parse(&req.claim_handle).ok_or(ApiError::ClaimHandleInvalid)?;
        let run_id = body_run_id(&req.run_id)?;
        check_principal(p)?;
        let claim_hash = handle.hash();
        let tenant = room_tenant(p);
        for _ in 0..RACE_RETRIES {
            let now = self.clock.epoch();
            let got =
                items::claim_reads(&*self.store, &claim_hash, &p.account_id, &tenant, run_id.as_str(), now).await?;
            let claim = got.claim.ok_or(ApiError::ClaimHandleInvalid)?;
            let run = owned_run(p, got.run)?;
            if got.slot_taken {
                return Err(ApiError::RunAlreadyBound);
            }
            let mut obs = claim.observer;
            rules::claimable(&obs)?;
            let binding_ref = ChatBindingRef::generate();
            let now = rfc3339(self.clock.now());
            obs.status = ObserverState::Bound;
            obs.binding_ref = Some(binding_ref.to_string());
            obs.run_id = Some(run.run_id.clone());
            let slot = RunChatSlot {
                run_id: run.run_id.clone(),
                binding_ref: binding_ref.to_string(),
                owner_hash: p.owner_hash(),
            };
            let binding = Binding {
                owner_hash: p.owner_hash(),
                state: BindingState::Active,
                run_id: run.run_id.clone(),
                created_at: now.clone(),
                revoked_at: None,
                target: BindingTarget::Chat { observer_ref: obs.observer_ref.clone() },
            };
            let mut tx = Tx::new();
            tx.delete(Role::Claim, items::claim_key(&claim_hash), items::claim_held_by(&p.account_id, &tenant))
                .put(Role::Slot, slot.to_item(), Cond::NotExists)
                .put(Role::Binding, binding.to_item(binding_ref.as_str()), Cond::NotExists)
                .put(Role::Observer, obs.to_item()?, items::observer_in(ObserverState::AwaitingClaim))
                .check(
                    Role::RunOwner,
                    run_key(&run.run_id),
                    crate::service::records::runs::owned_by_cond(&p.owner_hash()),
                );
            match tx.commit(&*self.store).await {
                Ok(()) => {
                    return Ok(Redacted::new(ChatBindingReceipt {
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
                    }));
                }
                // Consumed by someone else, or the browser disconnected meanwhile.
                Err(f) if f.failed(Role::Claim) || f.failed(Role::Observer) => {
                    return Err(ApiError::ClaimHandleInvalid);
                }
                Err(f) if f.failed(Role::RunOwner) => return Err(ApiError::NotFound),
                Err(f) if f.failed(Role::Slot) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}
