//! Asynchronous continue (`Prefer: respond-async` over REST, a task over MCP): the same
//! claim as a synchronous continue (receipt, `expected_version`, `run_busy`, scopes and
//! rechecks), answered as soon as the claim is committed; the turn then runs to its own
//! deadline outside the request, and its finalize completes the receipt, so a retry of
//! the key answers exactly what the synchronous call would have answered.
//! Must not depend on `http` or `mcp`.

use std::time::Duration as StdDuration;

use tracing::Instrument;

use super::continuation::{ClaimedTurn, Continuation, Proceed};
use super::{Invocation, OP_CONTINUE, RunService, detached, run_mutation};
use crate::domain::ids::IdempotencyKey;
use crate::domain::run::ContinueRequest;
use crate::domain::scopes::RUNS_WRITE;
use crate::domain::wire::RunJson;
use crate::error::ApiError;
use crate::service::{Caller, Mutation};

/// How long a client is told to wait before it first polls an accepted turn.
pub const RETRY_AFTER: StdDuration = StdDuration::from_secs(2);

/// The answer to an asynchronous continue.
#[derive(Debug)]
pub enum Continued {
    /// The request already has an answer: a receipt's replay, a refusal, or an expired
    /// run's ending (one transaction, no turn). Sent as the synchronous call sends it.
    Answered(Mutation),
    /// The turn is claimed and runs in the background: the run as it stands.
    Accepted(RunJson),
}

impl RunService {
    /// Claims a turn exactly as [`RunService::continue_run`] does, then hands it to the
    /// worker and answers without waiting for it.
    pub async fn continue_run_async(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
        req: ContinueRequest,
    ) -> Result<Continued, ApiError> {
        p.require(&[RUNS_WRITE])?;
        req.validate()?;
        let (id, hash, rkey) = run_mutation(p, OP_CONTINUE, run_id, key, &req)?;
        // The request's own limits (a Lambda's remaining time, the gateway) do not bound a
        // turn that outlives the request.
        let c = Continuation { hash, rkey, req, invocation: Invocation::default(), background: true };
        let (this, p) = (self.clone(), p.clone());
        detached(async move {
            match this.claimed_turn(&p, &id, &c).await? {
                Proceed::Answered(m) => Ok(Continued::Answered(m)),
                Proceed::With(turn) => {
                    let accepted = turn.claimed.observed_json(this.clock.epoch());
                    this.run_in_background(p, c, turn);
                    Ok(Continued::Accepted(accepted))
                }
            }
        })
        .await
    }

    /// The in-process worker: the claimed turn runs to its finalize in a task of its own.
    /// A process that dies meanwhile leaves the claim to its lease: the receipt answers
    /// `outcome_unknown` once the lease has passed, and the next continuation recovers
    /// the run, so nothing is applied twice.
    fn run_in_background(&self, p: Caller, c: Continuation, turn: ClaimedTurn) {
        let this = self.clone();
        let run_id = turn.claimed.run_id.clone();
        let work = async move {
            if let Err(e) = this.run_claimed_turn(&p, &c, turn).await {
                // The receipt holds what the client will read; this is for the operator.
                tracing::warn!(run_id, error = %e, "background turn ended without its answer recorded");
            }
        };
        tokio::spawn(work.instrument(tracing::info_span!("background_turn")));
    }
}
