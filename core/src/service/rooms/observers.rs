//! The browser's observer lane (cookie): issue a show-once chat claim handle, read the
//! observer (status and the one terminal message), poll progress receipts, disconnect.
//! Must not depend on `http` or `mcp`.

use super::{CLAIM_TTL_SECS, RACE_RETRIES, Redacted, RoomService, enum_name, rules, unlocked};
use crate::domain::room::{
    ClaimHandle, FalseFlags, OBSERVER_CREATED_SCHEMA, OBSERVER_DISCONNECT_SCHEMA, OBSERVER_EVENTS_SCHEMA,
    OBSERVER_SCHEMA, ObserverCreated, ObserverDisconnect, ObserverEventPage, ObserverRef, ObserverRequest,
    ObserverStatus, ObserverView, ProgressReceipt, TerminalMessage, redact_text, snapshot_ref, terminal_message_id,
};
use crate::domain::run::{Authority, Completion, Run};
use crate::domain::time::{epoch_rfc3339, rfc3339};
use crate::error::ApiError;
use crate::service::records::rooms::{
    self as items, BODY_VERSION, Binding, Claim, ObserverRecord, ObserverState, Snapshot,
};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;
use crate::store::Cond;

fn disconnect(observer_ref: &str, status: &'static str) -> Redacted<ObserverDisconnect> {
    Redacted::new(ObserverDisconnect {
        schema: OBSERVER_DISCONNECT_SCHEMA,
        observer_binding_ref: observer_ref.to_owned(),
        binding_status: ObserverStatus::Disconnected,
        disconnect_status: status,
    })
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

impl RoomService {
    /// `POST /api/agi/agent-run-observer/bindings`: a signed-in, non-guest browser issues a
    /// show-once claim handle for a chat it selected, claimable under the tenant it signed
    /// in with; the observer is read only under that tenant (a session signed in before
    /// tenants were recorded must sign in again); the snapshot is redacted before storage.
    pub async fn create_observer(&self, s: &Session, req: ObserverRequest) -> Result<ObserverCreated, ApiError> {
        s.require_member()?;
        unlocked(s.policy.rooms_locked)?;
        let tenant_ref = s.tenant_ref.clone().ok_or(ApiError::SessionRequired)?;
        let snapshot = req.validate()?;
        let now = self.clock.now();
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
            status: ObserverState::AwaitingClaim,
            binding_ref: None,
            run_id: None,
            snapshot_ref: (!snapshot.is_empty()).then(|| snapshot_ref(observer_ref.as_str())),
            snapshot_message_count: snapshot.len() as u32,
            snapshot_char_count: chars as u32,
            created_at: now,
            claim_expires_at: expires,
            schema_version: BODY_VERSION,
            tenant_ref: Some(tenant_ref.clone()),
        };
        let mut tx = Tx::new();
        let claim = Claim { observer: obs.clone(), expires_at: expires, tenant_ref: Some(tenant_ref) };
        tx.put(Role::Claim, claim.to_item()?, Cond::NotExists).put(Role::Observer, obs.to_item()?, Cond::NotExists);
        if !snapshot.is_empty() {
            let snap = Snapshot { observer_ref: obs.observer_ref.clone(), messages: snapshot };
            tx.put(Role::Snapshot, snap.to_item()?, Cond::NotExists);
        }
        tx.commit(&*self.store).await?;
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

    /// The session's own observer: another account's, or one created under another tenant
    /// (or stored without one), is not found.
    async fn own_observer(&self, s: &Session, observer_ref: &str) -> Result<ObserverRecord, ApiError> {
        let r = ObserverRef::parse(observer_ref).ok_or(ApiError::NotFound)?;
        let obs = items::read_observer(&*self.store, r.as_str()).await?.ok_or(ApiError::NotFound)?;
        if obs.account_id != s.account_id || !self.session_tenant(s).admits_observer(&obs) {
            return Err(ApiError::NotFound);
        }
        Ok(obs)
    }

    /// The observer's binding and its run (when claimed), in one read after the observer.
    async fn observer_state(&self, obs: &ObserverRecord) -> Result<(Option<Binding>, Option<Run>), ApiError> {
        let (Some(binding_ref), Some(run_id)) = (&obs.binding_ref, &obs.run_id) else { return Ok((None, None)) };
        items::binding_and_run(&*self.store, binding_ref, run_id).await
    }

    /// `GET /api/agi/agent-run-observer/bindings/{ref}`: status and the terminal message,
    /// which exists only for a bound run whose canonical terminal product was authorized;
    /// a withdrawn binding shows no run status and no message.
    pub async fn observer(&self, s: &Session, observer_ref: &str) -> Result<Redacted<ObserverView>, ApiError> {
        unlocked(s.policy.rooms_locked)?;
        let obs = self.own_observer(s, observer_ref).await?;
        let (binding, run) = self.observer_state(&obs).await?;
        let status = rules::observer_status(&obs, binding.as_ref(), self.clock.epoch());
        // Only a live binding shows its run: once withdrawn (or disconnected) nothing more
        // of the run reaches the chat, neither its status nor its terminal message.
        let run = run.filter(|_| status == ObserverStatus::Bound);
        let terminal_message = run.as_ref().and_then(|r| terminal_message(&obs.observer_ref, r));
        Ok(Redacted::new(ObserverView {
            schema: OBSERVER_SCHEMA,
            observer_binding_ref: obs.observer_ref.clone(),
            binding_status: status,
            lifecycle_status: run.as_ref().and_then(|r| enum_name(&r.lifecycle_status)),
            completion_status: run.as_ref().and_then(|r| enum_name(&r.completion_status)),
            terminal_message,
            pending_questions: run.as_ref().map(|r| r.pending_questions.clone()).unwrap_or_default(),
            created_at: rfc3339(obs.created_at),
            claim_expires_at: epoch_rfc3339(obs.claim_expires_at),
        }))
    }

    /// `GET …/events?after_seq&limit`: progress receipts of the bound run (kind, seq, time;
    /// never event data or chat messages). Empty until claimed and after withdrawal.
    pub async fn observer_events(
        &self,
        s: &Session,
        observer_ref: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Redacted<ObserverEventPage>, ApiError> {
        unlocked(s.policy.rooms_locked)?;
        crate::domain::run::check_event_limit(limit)?;
        let obs = self.own_observer(s, observer_ref).await?;
        let mut page = ObserverEventPage {
            schema: OBSERVER_EVENTS_SCHEMA,
            observer_binding_ref: obs.observer_ref.clone(),
            receipts: vec![],
            next_after_seq: after_seq,
            has_more: false,
        };
        if let (Some(binding_ref), Some(run_id), ObserverState::Bound) = (&obs.binding_ref, &obs.run_id, obs.status) {
            let b = items::read_binding(&*self.store, binding_ref).await?;
            if b.is_some_and(|b| b.is_active()) {
                let crate::service::records::runs::EventPage { events, has_more } =
                    crate::service::records::runs::events_after(&*self.store, run_id, after_seq, limit as usize)
                        .await?;
                page.receipts = events
                    .iter()
                    .map(|e| ProgressReceipt {
                        seq: e.seq,
                        kind: enum_name(&e.kind()).unwrap_or_default(),
                        at: rfc3339(e.created_at),
                        flags: FalseFlags::default(),
                    })
                    .collect();
                page.next_after_seq = page.receipts.last().map(|r| r.seq).unwrap_or(after_seq);
                page.has_more = has_more;
            }
        }
        Ok(Redacted::new(page))
    }

    /// `DELETE /api/agi/agent-run-observer/bindings/{ref}`: the browser disconnects (works
    /// under the policy lock). An unclaimed handle dies with it; a claimed chat binding
    /// is revoked and its slot freed, in the same transaction.
    pub async fn disconnect_observer(
        &self,
        s: &Session,
        observer_ref: &str,
    ) -> Result<Redacted<ObserverDisconnect>, ApiError> {
        for _ in 0..RACE_RETRIES {
            let mut obs = self.own_observer(s, observer_ref).await?;
            if obs.status == ObserverState::Disconnected {
                return Ok(disconnect(&obs.observer_ref, "already_disconnected"));
            }
            let previous = obs.status;
            let (binding, _) = self.observer_state(&obs).await?;
            obs.status = ObserverState::Disconnected;
            let mut tx = Tx::new();
            tx.put(Role::Observer, obs.to_item()?, items::observer_in(previous));
            match (binding, &obs.binding_ref) {
                (Some(b), Some(r)) if b.is_active() => self.revoke(&mut tx, b, r),
                _ => {
                    tx.delete(Role::Claim, items::claim_key(&obs.claim_hash), None);
                }
            }
            match tx.commit(&*self.store).await {
                Ok(()) => return Ok(disconnect(&obs.observer_ref, "disconnected")),
                Err(f) if f.is_cancelled() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}
