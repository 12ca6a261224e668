//! The worker of an asynchronous turn where the process that claimed it may not go on
//! working after its response (a Lambda invocation): the claim is handed, as a small
//! event of our own, to a worker (an asynchronous invocation of the same function), which
//! re-reads the claim, takes it over with one conditional write and runs the turn to its
//! finalize. A second delivery of the same event finds the claim taken and runs nothing.
//! The event names the turn and the caller's verified identity, never a credential: the
//! worker resolves the identity's link, binding and account again, as a request would.
//! Must not depend on `http` or `mcp`.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use serde::{Deserialize, Serialize};

use super::continuation::{ClaimedTurn, Continuation};
use super::{Invocation, OP_CONTINUE, RunService, owned, run_mutation};
use crate::auth::jwt::VerifiedToken;
use crate::domain::ids::IdempotencyKey;
use crate::domain::run::ContinueRequest;
use crate::domain::run::Run;
use crate::domain::{random_hex, sha256_hex};
use crate::error::ApiError;
use crate::service::records::receipts::held_by;
use crate::service::records::{Receipt, ReceiptState, Role, Tx, run_from_item, run_item, run_unchanged};
use crate::service::{Caller, Services};
use crate::store::Key;

/// The one field of a worker event's document: `{"helix_turn_worker": {...}}`.
pub const WORKER_EVENT: &str = "helix_turn_worker";
/// The version of [`WorkerEvent`] this build writes and reads.
const WORKER_EVENT_VERSION: u32 = 1;

/// The claimed turn a worker is to run. Carries no credential: the claim is named by the
/// SHA-256 of its token, the caller by its verified identity (re-resolved by the worker).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerEvent {
    /// The event's version; any other is refused.
    pub v: u32,
    pub run_id: String,
    pub idempotency_key: String,
    /// The SHA-256 (hex) of the claim token the turn was claimed under.
    pub claim: String,
    /// The claim took over a run whose earlier claim had expired unfinalized.
    pub recovered: bool,
    pub caller: WorkerCaller,
    /// The continuation's body, as its request hash was computed over it.
    pub request: ContinueRequest,
}

/// The caller's verified token identity and granted scopes (not the token).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerCaller {
    pub issuer: String,
    pub tenant: String,
    pub subject: String,
    pub scopes: Vec<String>,
}

impl WorkerEvent {
    /// The event as the document a worker invocation receives.
    pub fn to_document(&self) -> serde_json::Value {
        serde_json::json!({ WORKER_EVENT: self })
    }

    /// The worker event in an invocation's payload: `None` when the payload is not one
    /// (an API Gateway event); a refusal when it is one but malformed or of another version.
    pub fn from_document(payload: &serde_json::Value) -> Option<Result<Self, ApiError>> {
        let body = payload.as_object().filter(|o| o.len() == 1)?.get(WORKER_EVENT)?;
        let malformed = |rule: &str| ApiError::InvalidArgument { field: WORKER_EVENT.into(), rule: rule.into() };
        Some(match serde_json::from_value::<Self>(body.clone()) {
            Ok(e) if e.v == WORKER_EVENT_VERSION => Ok(e),
            Ok(_) => Err(malformed("version 1")),
            Err(_) => Err(malformed("a worker event of version 1")),
        })
    }
}

/// What a worker invocation did with its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerOutcome {
    /// The turn ran to its finalize: the status its continue answers.
    Ran(u16),
    /// The turn was taken over but ended without its answer recorded (its receipt tells
    /// the client; the lease ends it otherwise).
    Failed(&'static str),
    /// Nothing ran: the turn is not (or no longer) claimed under this event, or its
    /// caller may no longer continue it.
    Refused(&'static str),
}

impl WorkerOutcome {
    /// The invocation's result document (for the operator; nobody waits for it).
    pub fn to_document(&self) -> serde_json::Value {
        let (outcome, detail) = match self {
            Self::Ran(status) => ("ran", serde_json::json!(status)),
            Self::Failed(code) => ("failed", serde_json::json!(code)),
            Self::Refused(why) => ("refused", serde_json::json!(why)),
        };
        serde_json::json!({ WORKER_EVENT: { "outcome": outcome, "detail": detail } })
    }
}

/// Hands a claimed turn to a worker. `Ok` once the worker has the event (an `Event`
/// invocation queued); an error leaves the turn to the request that claimed it.
#[async_trait::async_trait]
pub trait TurnDispatch: Send + Sync {
    async fn dispatch(&self, event: &WorkerEvent) -> Result<(), String>;
}

impl RunService {
    /// Sets where asynchronous turns run when the process may not outlive its response.
    /// Set once; `false` when one was already set.
    pub fn set_worker(&self, worker: Arc<dyn TurnDispatch>) -> bool {
        self.worker.set(worker).is_ok()
    }

    /// Whether an asynchronous turn can be accepted in this invocation: the process goes
    /// on after its response, or a worker takes the turn.
    pub fn accepts_async(&self, invocation: Invocation) -> bool {
        invocation.outlives_response() || self.worker.get().is_some()
    }

    /// Hands `turn`, claimed under `key` by `p`, to the worker.
    pub(super) async fn hand_to_worker(
        &self,
        p: &Caller,
        key: &IdempotencyKey,
        c: &Continuation,
        turn: &ClaimedTurn,
    ) -> Result<(), String> {
        let worker = self.worker.get().ok_or("no worker is set")?;
        let event = WorkerEvent {
            v: WORKER_EVENT_VERSION,
            run_id: turn.claimed.run_id.clone(),
            idempotency_key: key.as_str().to_owned(),
            claim: sha256_hex(&turn.token),
            recovered: turn.recovered(),
            caller: WorkerCaller {
                issuer: p.issuer.clone(),
                tenant: p.tenant.clone(),
                subject: p.subject.clone(),
                scopes: p.scopes.clone(),
            },
            request: c.req.clone(),
        };
        worker.dispatch(&event).await
    }

    /// Runs the turn `event` names, if it is still claimed under the event's claim: the
    /// run and the key's receipt are read again, the claim is taken over (a new token in
    /// both, one transaction conditioned on the old one), then the turn runs to its
    /// finalize within `remaining` (the worker invocation's time). A store error before
    /// the take-over is an error (the invocation is retried); anything after it is an
    /// outcome, since a retry could only be refused.
    async fn work(
        &self,
        p: &Caller,
        event: &WorkerEvent,
        remaining: Option<StdDuration>,
    ) -> Result<WorkerOutcome, ApiError> {
        let refused = |why| Ok(WorkerOutcome::Refused(why));
        let Some(key) = IdempotencyKey::parse(&event.idempotency_key) else { return refused("malformed") };
        let Ok((id, hash, rkey)) = run_mutation(p, OP_CONTINUE, &event.run_id, &key, &event.request) else {
            return refused("malformed");
        };
        let (Some(run), Some(receipt)) = self.read_run_and_receipt(None, id.as_str(), &rkey, false).await? else {
            return refused("not_claimed");
        };
        let receipt = Receipt::from_item(&receipt)?;
        let now = self.clock.epoch();
        let ReceiptState::InProgress { claim_token } = &receipt.state else { return refused("not_claimed") };
        if receipt.request_hash != hash || sha256_hex(claim_token) != event.claim || receipt.lease_until <= now {
            return refused("not_claimed");
        }
        let Ok(run) = owned(p, &run) else { return refused("not_claimed") };
        let lease_until = match &run.claim {
            Some(c) if c.token == *claim_token && c.lease_until > now => c.lease_until,
            _ => return refused("not_claimed"),
        };
        let admitted = match self.admit_scopes(p, &run.database_scope, Some(&run)) {
            Ok(admitted) => admitted,
            Err(e) => return refused(e.code()),
        };
        let Some((claimed, token)) = self.take_over(&run, &receipt, &rkey).await? else { return refused("taken") };
        let turn = ClaimedTurn::new(claimed, token, lease_until, event.recovered, &admitted);
        let c = Continuation {
            hash,
            rkey,
            req: event.request.clone(),
            invocation: Invocation { remaining },
            background: true,
        };
        Ok(match self.run_claimed_turn(p, &c, turn).await {
            Ok(m) => WorkerOutcome::Ran(m.status),
            Err(e) => {
                tracing::warn!(run_id = %id.as_str(), error = %e, "worker turn ended without its answer recorded");
                WorkerOutcome::Failed(e.code())
            }
        })
    }
}

impl RunService {
    /// Takes the claim of `run` (held by `receipt`, a reservation) over: a new claim token
    /// in both, one transaction on condition of the old token and the run's revision.
    /// `None` when another took it over first, or the turn finished.
    async fn take_over(&self, run: &Run, receipt: &Receipt, rkey: &Key) -> Result<Option<(Run, String)>, ApiError> {
        let ReceiptState::InProgress { claim_token } = &receipt.state else { return Ok(None) };
        let token = random_hex(16);
        let mut claimed = run.clone();
        if let Some(c) = claimed.claim.as_mut() {
            c.token = token.clone();
        }
        claimed.rev += 1;
        let taken = Receipt { state: ReceiptState::InProgress { claim_token: token.clone() }, ..receipt.clone() };
        let mut tx = Tx::new();
        tx.put(Role::Receipt, taken.to_item(rkey), held_by(claim_token)).put(
            Role::Run,
            run_item(&claimed)?,
            run_unchanged(run.rev),
        );
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(Some((claimed, token))),
            Err(f) if f.is_cancelled() => Ok(None),
            Err(f) => Err(f.into()),
        }
    }

    /// The request's own turn back after a hand-over that reported failure: taken over as a
    /// worker takes it, so that if the event reached a worker after all only one of the two
    /// runs the turn. `None` when a worker holds or finished it.
    pub(super) async fn take_back(&self, c: &Continuation, turn: ClaimedTurn) -> Result<Option<ClaimedTurn>, ApiError> {
        let run_id = turn.claimed.run_id.clone();
        let (Some(run), Some(receipt)) = self.read_run_and_receipt(None, &run_id, &c.rkey, false).await? else {
            return Ok(None);
        };
        let (run, receipt) = (run_from_item(&run)?, Receipt::from_item(&receipt)?);
        let held = matches!(&receipt.state, ReceiptState::InProgress { claim_token } if *claim_token == turn.token);
        if !held || run.claim.as_ref().map(|c| &c.token) != Some(&turn.token) {
            return Ok(None);
        }
        Ok(self.take_over(&run, &receipt, &c.rkey).await?.map(|(claimed, token)| turn.reclaimed(claimed, token)))
    }
}

impl Services {
    /// A worker invocation: the caller's identity resolved again (an identity no longer
    /// linked, or an account disabled, runs nothing), then the turn the event names.
    pub async fn run_turn_worker(
        &self,
        event: &WorkerEvent,
        remaining: Option<StdDuration>,
    ) -> Result<WorkerOutcome, ApiError> {
        let token = VerifiedToken {
            issuer: event.caller.issuer.clone(),
            subject: event.caller.subject.clone(),
            tenant: event.caller.tenant.clone(),
            scopes: event.caller.scopes.clone(),
            expires_at: 0,
        };
        let p = match self.accounts.resolve_with(token, |_| vec![]).await {
            Ok(p) => p,
            Err(ApiError::AccountNotLinked) => return Ok(WorkerOutcome::Refused("account_not_linked")),
            Err(e) => return Err(e),
        };
        self.runs.work(&p, event, remaining).await
    }
}
