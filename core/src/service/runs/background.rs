//! Asynchronous continue (`Prefer: respond-async` over REST, a task over MCP): the same
//! claim as a synchronous continue (receipt, `expected_version`, `run_busy`, scopes and
//! rechecks), answered as soon as the claim is committed; the turn then runs to its own
//! deadline outside the request, and its finalize completes the receipt, so a retry of
//! the key answers exactly what the synchronous call would have answered.
//! Must not depend on `http` or `mcp`.

use std::time::Duration as StdDuration;

use tracing::Instrument;

use super::continuation::{ClaimedTurn, Continuation, Proceed};
use super::{Invocation, OP_CONTINUE, RunService, detached, owned};
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::run::{CancelRequest, ContinueRequest};
use crate::domain::scopes::RUNS_READ;
use crate::domain::wire::{RunJson, RunView};
use crate::error::ApiError;
use crate::service::records::{RECEIPT_TTL_SECS, Receipt, ReceiptState, receipt_key};
use crate::service::{Caller, Mutation};

/// How long a client is told to wait before it first polls an accepted turn.
pub const RETRY_AFTER: StdDuration = StdDuration::from_secs(2);

/// The answer to an asynchronous continue.
#[derive(Debug)]
pub enum Continued {
    /// The request already has an answer: a receipt's replay, a refusal, or an expired
    /// run's ending (one transaction, no turn). Sent as the synchronous call sends it.
    Answered(Mutation<RunView>),
    /// The turn is claimed and runs in the background: the run as it stands.
    Accepted(RunJson),
}

impl RunService {
    /// Claims a turn exactly as [`RunService::continue_run`] does, then hands it to the
    /// worker and answers without waiting for it. `invocation` is the request's own: a
    /// process that outlives its response runs the turn in a task of its own; otherwise
    /// (a Lambda invocation) the worker set with [`RunService::set_worker`] takes it, and
    /// if it cannot be handed over the turn is taken back and runs in this request, within
    /// the request's limits, and the synchronous answer is returned.
    pub async fn continue_run_async(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
        req: ContinueRequest,
        invocation: Invocation,
    ) -> Result<Continued, ApiError> {
        // The request's own limits (a Lambda's remaining time, the gateway) do not bound a
        // turn that outlives the request.
        let (id, c) = Continuation::checked(p, run_id, key, req, Invocation::default(), true)?;
        let (this, p, key) = (self.clone(), p.clone(), key.clone());
        detached(async move {
            match this.claimed_turn(&p, &id, &c).await? {
                Proceed::Answered(m) => Ok(Continued::Answered(m)),
                Proceed::With(turn) if invocation.outlives_response() => {
                    let accepted = turn.claimed.observed_json(this.clock.epoch());
                    this.run_in_background(p, c, turn);
                    Ok(Continued::Accepted(accepted))
                }
                Proceed::With(turn) => {
                    let accepted = turn.claimed.observed_json(this.clock.epoch());
                    match this.hand_to_worker(&p, &key, &c, &turn).await {
                        Ok(()) => Ok(Continued::Accepted(accepted)),
                        Err(e) => {
                            tracing::warn!(run_id = %id.as_str(), error = %e, "no worker took the turn: it runs in its request");
                            match this.take_back(&c, turn).await? {
                                Some(turn) => {
                                    let c = Continuation { invocation, background: false, ..c };
                                    this.run_claimed_turn(&p, &c, turn).await.map(Continued::Answered)
                                }
                                // The event reached a worker after all: it has the turn.
                                None => Ok(Continued::Accepted(accepted)),
                            }
                        }
                    }
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

/// A continuation's turn as its key's receipt tells it, for a client that polls the key
/// instead of replaying the request (an MCP task).
#[derive(Debug)]
pub struct BackgroundTurn {
    /// The run's public version now (a cancel is taken at it).
    pub version: u64,
    /// When the turn was claimed, and until when its receipt (and so the task) is kept.
    pub claimed_at: i64,
    pub expires_at: i64,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub state: TurnState,
}

#[derive(Debug)]
pub enum TurnState {
    Running,
    /// The answer the synchronous call would have given (a refusal included).
    Finished(Result<Mutation<RunView>, ApiError>),
}

impl RunService {
    /// The turn that `key` continued on the caller's run. The key's receipt is looked up
    /// under the caller's own identity and the run must be the caller's, so a name that
    /// another caller learned finds nothing (`not_found`, like a missing one).
    pub async fn background_turn(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
    ) -> Result<BackgroundTurn, ApiError> {
        p.require(&[RUNS_READ])?;
        let id = RunId::parse(run_id).ok_or(ApiError::NotFound)?;
        let rkey = receipt_key(&p.identity_hash(), OP_CONTINUE, key.as_str());
        let (run, receipt) = self.read_run_and_receipt(None, id.as_str(), &rkey, false).await?;
        let run = owned(p, &run.ok_or(ApiError::NotFound)?)?;
        let receipt = Receipt::from_item(&receipt.ok_or(ApiError::NotFound)?)?;
        if receipt.run_id.as_deref() != Some(id.as_str()) {
            return Err(ApiError::NotFound);
        }
        let now = self.clock.epoch();
        let state = match receipt.state {
            ReceiptState::InProgress { .. } if receipt.lease_until > now => TurnState::Running,
            ReceiptState::InProgress { .. } => {
                TurnState::Finished(Err(ApiError::OutcomeUnknown { run_id: receipt.run_id }))
            }
            ReceiptState::Completed { status, body } => {
                let body = serde_json::from_str(&body).map_err(ApiError::internal)?;
                TurnState::Finished(Ok(Mutation::answered(status, body, false)))
            }
        };
        Ok(BackgroundTurn {
            version: run.version,
            claimed_at: receipt.expires_at - RECEIPT_TTL_SECS,
            expires_at: receipt.expires_at,
            updated_at: run.updated_at,
            state,
        })
    }

    /// Cancels the run of a turn that is still running, at the run's current version, under
    /// a cancel key derived from the turn's key (a repeated cancel replays). `None` when the
    /// turn has already finished: its run is left as the turn left it.
    pub async fn cancel_background_turn(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
    ) -> Result<Option<Mutation<RunView>>, ApiError> {
        let turn = self.background_turn(p, run_id, key).await?;
        if !matches!(turn.state, TurnState::Running) {
            return Ok(None);
        }
        let cancel_key = format!("task-cancel-{}", &crate::domain::sha256_hex(key.as_str())[..40]);
        let cancel_key = IdempotencyKey::parse(&cancel_key).expect("a derived key is visible ASCII of a valid length");
        let req = CancelRequest { expected_version: turn.version, reason: Some("tasks/cancel".into()) };
        self.cancel_run(&crate::service::Actor::Agent(p.clone()), run_id, &cancel_key, req).await.map(Some)
    }
}
