//! The bounds an action passes before it is queued and again before it is dispatched:
//! the owner-set region of the environment binding (set on the pairing page: the
//! pairing lane's `region`), the
//! player's reach, the per-subject rate limit (the store's atomic per-minute counter),
//! and the gate a queued workflow passes at dispatch (`expired` after the queue time,
//! `paused: lease_lapsed`, `rejected: out_of_region` when the region changed). Must not
//! depend on `http` or `mcp`.

use serde::{Deserialize, Serialize};

use super::{EmbodimentService, LEASE_SECS};
use crate::domain::embodiment::WorkflowView;
use crate::domain::embodiment::{RegionBox, Step, WorkflowState, within_reach};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::Mutation;
use crate::service::records::Tx;
use crate::service::records::embodiment::{
    EnvBinding, Selection, SubjectEntry, WorkflowRecord, subject_action_counter,
};
use crate::service::records::idempotent::answer_from_receipt;
use crate::store::Key;

/// Most actions accepted per subject (player) and minute.
pub const ACTIONS_PER_MINUTE: i64 = 30;
pub const REGION_SCHEMA: &str = "helix.room_connector_region.v1";
/// Why a queued workflow paused: its member's control lease of the subject lapsed.
pub const LEASE_LAPSED: &str = "lease_lapsed";
/// Why a queued workflow expired.
pub const QUEUE_EXPIRED: &str = "not_dispatched_in_time";

/// The body of the region route: a box (`min`, `max`), or `clear: true`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegionRequest {
    pub room_id: String,
    #[serde(default)]
    pub min: Option<crate::domain::embodiment::action::Pos>,
    #[serde(default)]
    pub max: Option<crate::domain::embodiment::action::Pos>,
    /// `true` removes the region (then neither `min` nor `max`).
    #[serde(default)]
    pub clear: bool,
}

/// `helix.room_connector_region.v1`: the binding's region now (`null`: none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RegionSet {
    pub schema: &'static str,
    pub environment_binding_id: String,
    pub room_id: String,
    pub region: Option<RegionBox>,
}

impl RegionRequest {
    pub(super) fn region(&self) -> Result<Option<RegionBox>, ApiError> {
        match (self.clear, &self.min, &self.max) {
            (true, None, None) => Ok(None),
            (false, Some(min), Some(max)) => {
                let r = RegionBox { min: min.clone(), max: max.clone() };
                if r.well_formed() {
                    Ok(Some(r))
                } else {
                    Err(ApiError::InvalidRequest("region: min <= max on every axis, -64 <= y <= 320".into()))
                }
            }
            _ => Err(ApiError::InvalidRequest("region: either min and max, or clear: true".into())),
        }
    }
}

/// Where a subject's reach is counted from, and whether the steps are inside the
/// binding's region: `action_refused` with `out_of_region` or `out_of_reach`.
pub(super) fn check_bounds(b: &EnvBinding, subject: &SubjectEntry, steps: &[Step]) -> Result<(), ApiError> {
    if b.region.as_ref().is_some_and(|r| !r.admits_steps(steps)) {
        return Err(ApiError::ActionRefused { reason: "out_of_region" });
    }
    if !within_reach(subject.position, steps) {
        return Err(ApiError::ActionRefused { reason: "out_of_reach" });
    }
    Ok(())
}

/// Epoch seconds since which the workflow waits in the queue.
fn queued_since(w: &WorkflowRecord) -> i64 {
    if w.queued_at > 0 {
        return w.queued_at;
    }
    chrono::DateTime::parse_from_rfc3339(&w.created_at).map(|t| t.timestamp()).unwrap_or(0)
}

/// The member who queued the workflow still holds the subject's control lease.
fn lease_live(b: &EnvBinding, w: &WorkflowRecord, now: i64) -> bool {
    b.selection_of(&w.account_id).is_some_and(|s| s.subject_ref == w.subject_ref && s.lease_until > now)
}

/// What the dispatch gate decides for a queued workflow (None: dispatch it).
/// `ttl`: how long a queued workflow may wait (`config.embodiment.queue_ttl_secs`).
pub(super) fn gate(b: &EnvBinding, w: &WorkflowRecord, now: i64, ttl: i64) -> Option<(WorkflowState, &'static str)> {
    if w.state != WorkflowState::Queued {
        return None;
    }
    if now - queued_since(w) > ttl {
        return Some((WorkflowState::Expired, QUEUE_EXPIRED));
    }
    if !lease_live(b, w, now) {
        return Some((WorkflowState::Paused, LEASE_LAPSED));
    }
    let rest = w.steps.get(w.step_index as usize..).unwrap_or_default();
    if b.region.as_ref().is_some_and(|r| !r.admits_steps(rest)) {
        return Some((WorkflowState::Rejected, "out_of_region"));
    }
    None
}

/// The workflow after an acknowledgement `rejected`: the connector refused the command
/// instead of accepting it. The first step refused is `rejected` (nothing touched the
/// world); a later step is `failed: step_rejected:<reason>` (earlier steps did); after
/// `accepted` it is `failed: step_failed:<reason>` like a failure.
pub(super) fn rejected(w: &WorkflowRecord, reason: Option<&str>) -> (WorkflowState, String) {
    let reason = reason.filter(|r| machine_reason(r)).unwrap_or("unspecified");
    match w.state {
        WorkflowState::Dispatched if w.step_index == 0 => (WorkflowState::Rejected, reason.to_owned()),
        WorkflowState::Dispatched => (WorkflowState::Failed, format!("step_rejected:{reason}")),
        _ => (WorkflowState::Failed, format!("step_failed:{reason}")),
    }
}

/// A connector's reason as stored: 1-64 of `a-z 0-9 _ . -` (anything else is `unspecified`).
fn machine_reason(r: &str) -> bool {
    (1..=64).contains(&r.len())
        && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
}

impl EmbodimentService {
    /// Counts one action for the subject in this minute (the store's atomic counter).
    /// Over [`ACTIONS_PER_MINUTE`] it is `rate_limited`, unless the idempotency key was
    /// already answered: then that answer is replayed.
    pub(super) async fn count_action(
        &self,
        b: &EnvBinding,
        subject: &SubjectEntry,
        receipt: &Key,
        request_hash: &str,
    ) -> Result<Option<Mutation<WorkflowView>>, ApiError> {
        let now = self.clock.epoch();
        let minute = now.div_euclid(60);
        let counter = subject_action_counter(&b.binding_id, &subject.native_id, minute);
        if self.store.count(&counter, (minute + 2) * 60).await? <= ACTIONS_PER_MINUTE {
            return Ok(None);
        }
        if let Some(item) = self.store.get(receipt).await? {
            return answer_from_receipt(&item, request_hash, now).map(|a| Some(a.into()));
        }
        Err(ApiError::RateLimited { retry_after_secs: (60 - now.rem_euclid(60)) as u64 })
    }

    /// The dispatch gate of one queued workflow at poll time: true when it was settled
    /// (expired, paused or rejected) instead of dispatched, or changed meanwhile.
    pub(super) async fn gated(&self, b: &EnvBinding, w: &WorkflowRecord) -> Result<bool, ApiError> {
        match gate(b, w, self.clock.epoch(), self.config.embodiment.queue_ttl_secs) {
            Some((state, reason)) => {
                self.settle(w, state, Some(reason)).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A status read expires a queued workflow past its queue time (lazily: the
    /// emulator's TTL is not relied on); answers the workflow as it is now.
    pub(super) async fn expire_if_due(&self, w: WorkflowRecord) -> Result<WorkflowRecord, ApiError> {
        if w.state != WorkflowState::Queued
            || self.clock.epoch() - queued_since(&w) <= self.config.embodiment.queue_ttl_secs
        {
            return Ok(w);
        }
        self.settle(&w, WorkflowState::Expired, Some(QUEUE_EXPIRED)).await?;
        let fresh =
            crate::service::records::embodiment::read_workflow(self.store.as_ref(), &w.room_id, &w.workflow_ref)
                .await?;
        Ok(fresh.unwrap_or(w))
    }

    /// `resume`: the workflow queued again and the member's control lease of its subject
    /// re-taken (renewed, or re-added when it lapsed and nobody holds it), in one
    /// transaction conditional on both revisions. False when either changed meanwhile.
    pub(super) async fn requeue(&self, b: &EnvBinding, w: &WorkflowRecord, account: &str) -> Result<bool, ApiError> {
        let now = self.clock.epoch();
        let mut n = w.next();
        n.state = WorkflowState::Queued;
        n.reason = None;
        n.queued_at = now;
        n.updated_at = rfc3339(self.clock.now());
        let mut next = b.next();
        next.selections.retain(|s| s.account_id != account);
        next.selections.push(Selection {
            account_id: account.to_owned(),
            subject_ref: w.subject_ref.clone(),
            lease_until: now + LEASE_SECS,
        });
        let mut tx = Tx::new();
        n.write(&mut tx, w.rev);
        next.write(&mut tx, b.rev);
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => Ok(true),
            Err(f) if f.is_cancelled() => Ok(false),
            Err(f) => Err(f.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::embodiment::action::Pos;

    #[test]
    fn a_region_request_is_a_box_or_a_clear() {
        let p = |x, y, z| Some(Pos { x, y, z });
        let req = |min, max, clear| RegionRequest { room_id: "r".into(), min, max, clear };
        assert!(req(p(0, 0, 0), p(1, 1, 1), false).region().unwrap().is_some());
        assert_eq!(req(None, None, true).region().unwrap(), None);
        assert!(req(p(0, 0, 0), p(1, 1, 1), true).region().is_err(), "a box and clear");
        assert!(req(p(0, 0, 0), None, false).region().is_err());
        assert!(req(None, None, false).region().is_err());
        assert!(req(p(2, 0, 0), p(1, 1, 1), false).region().is_err(), "min > max");
    }

    #[test]
    fn a_rejection_is_rejected_only_before_any_step_touched_the_world() {
        assert!(machine_reason("not_in_inventory") && !machine_reason("Bearer x") && !machine_reason(""));
        for (state, step, reason, want) in [
            (WorkflowState::Dispatched, 0, Some("player_offline"), (WorkflowState::Rejected, "player_offline")),
            (WorkflowState::Dispatched, 0, Some("hac_SECRET"), (WorkflowState::Rejected, "unspecified")),
            (WorkflowState::Dispatched, 1, Some("x"), (WorkflowState::Failed, "step_rejected:x")),
            (WorkflowState::Running, 0, Some("x"), (WorkflowState::Failed, "step_failed:x")),
        ] {
            let (s, r) = rejected(&sample(state, step), reason);
            assert!(sample(state, step).state.may_become(s), "{state:?} -> {s:?}");
            assert_eq!((s, r.as_str()), want);
        }
    }

    fn sample(state: WorkflowState, step_index: u32) -> WorkflowRecord {
        let v = serde_json::json!({
            "workflow_ref": "wf_1", "room_id": "room_1", "binding_id": "env_1", "account_id": "a",
            "subject_ref": "sub_1", "native_id": "n", "action": {"type": "stop"}, "steps": [{"type": "stop"}, {"type": "stop"}],
            "state": state, "reason": null, "step_index": step_index, "block_changes": 0, "lease_token": null,
            "dispatch_epoch": null, "deadline_ms": null, "last_seq": 0, "last_observation": null,
            "last_observation_at": null, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"
        });
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_gate_expires_pauses_or_rejects_a_queued_workflow() {
        let b: EnvBinding = serde_json::from_value(serde_json::json!({
            "binding_id": "env_1", "room_id": "room_1", "world_id": "w", "owner_account": "a", "credential_hash": "h",
            "status": "active", "epoch": 1, "connector": null, "last_seen": 0, "directory_generation": 1,
            "subjects": [], "selections": [{"account_id": "a", "subject_ref": "sub_1", "lease_until": 2000}],
            "estop_generation": 0, "estop_active": false, "created_at": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        const TTL: i64 = 600;
        let mut w = sample(WorkflowState::Queued, 0);
        w.queued_at = 1500;
        assert_eq!(gate(&b, &w, 1600, TTL), None);
        assert_eq!(gate(&b, &w, 1500 + TTL + 1, TTL), Some((WorkflowState::Expired, QUEUE_EXPIRED)));
        assert_eq!(gate(&b, &w, 2000, TTL), Some((WorkflowState::Paused, LEASE_LAPSED)), "the lease ends at 2000");
        let mut boxed = b.clone();
        let p = |x, y, z| Pos { x, y, z };
        boxed.region = Some(RegionBox { min: p(0, 0, 0), max: p(1, 1, 1) });
        w.steps = vec![Step::LookAt(p(5, 5, 5))];
        assert_eq!(gate(&boxed, &w, 1600, TTL), Some((WorkflowState::Rejected, "out_of_region")));
        for (state, _) in
            [gate(&b, &w, 2000, TTL), gate(&boxed, &w, 1600, TTL), gate(&b, &w, 9999, TTL)].into_iter().flatten()
        {
            assert!(WorkflowState::Queued.may_become(state));
        }
        w.state = WorkflowState::Dispatched;
        assert_eq!(gate(&boxed, &w, 1600, TTL), None, "only a queued workflow is gated");
    }
}
