//! Ending a run without a turn: cancel (an agent's or the owning person's), and budget exhaustion of an
//! expired run. Each is one transaction: the terminal transition (which bumps the
//! version), its one event, and the receipt of the request that ended it.

use chrono::{DateTime, Utc};

use super::RunService;
use super::{Actor, Commit, OP_CANCEL, RunWrite, check_mutable, detached, run_mutation_by};
use crate::domain::event::{BudgetExhausted, EventData, EventLog, ExhaustionReason, RunCancelled};
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::run::{CancelRequest, Run};
use crate::domain::scopes::RUNS_WRITE;
use crate::domain::wire::RunView;
use crate::error::ApiError;
use crate::service::Mutation;
use crate::store::Key;

/// A claim taken between a cancel's read and its write changes `rev` but not the
/// version: the cancel re-reads and tries again this many times.
const CANCEL_ATTEMPTS: usize = 4;

impl RunService {
    /// The one cancel, for an agent's caller or for the signed-in person whose account
    /// owns the run (the person's kill switch): the same receipt, version check,
    /// transaction and stop signal to a running turn (here, or through the store on
    /// another instance).
    pub async fn cancel_run(
        &self,
        actor: &Actor,
        run_id: &str,
        key: &IdempotencyKey,
        req: CancelRequest,
    ) -> Result<Mutation<RunView>, ApiError> {
        actor.require(&[RUNS_WRITE])?;
        req.validate()?;
        let (id, hash, rkey) =
            run_mutation_by(&actor.owner_hash(), &actor.identity_hash(), OP_CANCEL, run_id, key, &req)?;
        // Its own task: a caller gone mid-request neither half-ends the run nor skips
        // the signal that stops a running turn.
        let (this, actor) = (self.clone(), actor.clone());
        detached(async move { this.cancel_attempts(&actor, id, hash, rkey, req).await }).await
    }

    async fn cancel_attempts(
        &self,
        actor: &Actor,
        id: RunId,
        hash: String,
        rkey: Key,
        req: CancelRequest,
    ) -> Result<Mutation<RunView>, ApiError> {
        for attempt in 0..CANCEL_ATTEMPTS {
            let (run_item_now, receipt) =
                self.read_run_and_receipt(actor.caller(), id.as_str(), &rkey, attempt == 0).await?;
            if let Some(existing) = receipt {
                return self.answer_from_receipt(&existing, &hash);
            }
            let run = actor.owns(&run_item_now.ok_or(ApiError::NotFound)?)?;
            check_mutable(&run, req.expected_version)?;
            let data = EventData::RunCancelled(RunCancelled {
                reason: req.reason.clone(),
                reason_included: req.reason.is_some(),
            });
            match self.end_run(run, &rkey, &hash, Run::cancel, data).await? {
                Commit::Done(m) => {
                    if !m.replayed {
                        self.signal_cancelled(id.as_str());
                    }
                    return Ok(m);
                }
                Commit::RunChanged => continue, // re-evaluate from a fresh read
            }
        }
        Err(ApiError::RunBusy)
    }

    /// Stops this process's running turn of the run, if any (its finalize would fail its
    /// compare-and-set anyway; the signal only ends the wait early).
    pub(super) fn signal_cancelled(&self, run_id: &str) {
        if let Some(token) = self.running.lock().expect("running map").get(run_id) {
            token.cancel();
        }
    }

    pub(super) async fn exhaust(&self, run: Run, rkey: &Key, hash: &str) -> Result<Mutation<RunView>, ApiError> {
        let data = EventData::BudgetExhausted(BudgetExhausted {
            reason: ExhaustionReason::Expired,
            steps_used: run.budget.steps_used,
        });
        match self.end_run(run, rkey, hash, Run::exhaust, data).await? {
            Commit::Done(m) => Ok(m),
            Commit::RunChanged => Err(ApiError::RunBusy),
        }
    }

    /// Ends a run in one transaction: the terminal transition (which bumps the
    /// version), its one event, and the receipt of the request that ended it.
    async fn end_run(
        &self,
        mut run: Run,
        rkey: &Key,
        hash: &str,
        end: fn(&mut Run, DateTime<Utc>),
        data: EventData,
    ) -> Result<Commit, ApiError> {
        let now = self.clock.now();
        let old_rev = run.rev;
        end(&mut run, now);
        run.rev += 1;
        let mut log = EventLog::after(&run.run_id, run.last_seq, now);
        log.push(run.version, data);
        run.last_seq = log.last_seq();
        self.commit(rkey, hash, 200, &run, RunWrite::Update { rev: old_rev }, &log.events).await
    }
}
