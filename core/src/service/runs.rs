//! Run use cases. Every mutation is idempotent (receipt), versioned (public
//! `version`) and guarded by a compare-and-set on the run's `rev`:
//! start = 1 transaction; continue = read, claim transaction, turn, finalize
//! transaction; cancel = read, 1 transaction. See docs/round-trips.md.
//! Continue lives in `continuation`, cancel and the other run endings in `ending`,
//! scope admission (with the room-binding refusal) in `admission`, read mode and the
//! approval of a turn's room mutation in `approval`. The last feature
//! service: it reads room evidence and probes through [`SourceService`]; no feature
//! depends on it. Must not depend on `http` or `mcp`.

mod admission;
mod approval;
mod background;
mod continuation;
mod ending;
mod listing;
mod worker;

pub use super::Actor;
pub use background::{BackgroundTurn, Continued, RETRY_AFTER, TurnState};
pub use worker::{TurnDispatch, WORKER_EVENT, WorkerCaller, WorkerEvent, WorkerOutcome};

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::domain::event::{Event, EventData, EventLog, RunStarted};
use crate::domain::hash_parts;
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::run::{Run, StartRequest};
use crate::domain::scopes::oauth_scopes_of;
use crate::domain::scopes::{RUNS_READ, RUNS_WRITE};
use crate::domain::wire::{EventPageView, EvidenceBundleView, RunView};
use crate::error::ApiError;
use crate::executor::TurnExecutor;
use crate::store::{Cond, Item, Key};

use super::records::runs::{account_run_item, events_after, is_owned_by};
use super::records::{
    Committed, Completion, Role, Tx, answer_from_receipt, commit_once, event_item, receipt_key, run_from_item,
    run_item, run_key, run_unchanged,
};
use super::{Caller, Ctx, Mutation, SourceService};

const OP_START: &str = "run.start";
const OP_CONTINUE: &str = "run.continue";
const OP_CANCEL: &str = "run.cancel";
pub use crate::domain::run::DEFAULT_EVENT_LIMIT;

/// Optional per-invocation limits the transport knows (Lambda remaining time).
#[derive(Debug, Clone, Copy, Default)]
pub struct Invocation {
    pub remaining: Option<StdDuration>,
}

impl Invocation {
    /// Whether this process may go on working after it has answered: not in a Lambda
    /// invocation (the only transport that sets `remaining`), whose environment may be
    /// frozen or discarded once the response is handed back. An asynchronous turn is
    /// accepted only where it can run.
    pub fn outlives_response(&self) -> bool {
        self.remaining.is_none()
    }
}

/// The request a receipt answers for: owner, operation, run, canonical body. Receipts
/// are keyed by the token identity; the owner hash here makes a key reused after the
/// identity was linked to another account an `idempotency_conflict`, never a replay.
fn request_hash(owner_hash: &str, operation: &str, scope: &str, body: &Value) -> String {
    hash_parts(&["request.v2", owner_hash, operation, scope, &body.to_string()])
}

/// A mutation of an existing run: its id, its request hash and its receipt key.
fn run_mutation(
    p: &Caller,
    operation: &str,
    run_id: &str,
    key: &IdempotencyKey,
    req: &impl serde::Serialize,
) -> Result<(RunId, String, Key), ApiError> {
    run_mutation_by(&p.owner_hash(), &p.identity_hash(), operation, run_id, key, req)
}

/// [`run_mutation`] for an actor named by its owner and receipt identity hashes.
fn run_mutation_by(
    owner_hash: &str,
    identity_hash: &str,
    operation: &str,
    run_id: &str,
    key: &IdempotencyKey,
    req: &impl serde::Serialize,
) -> Result<(RunId, String, Key), ApiError> {
    let id = RunId::parse(run_id).ok_or(ApiError::NotFound)?;
    let body = serde_json::to_value(req).map_err(ApiError::internal)?;
    let hash = request_hash(owner_hash, operation, id.as_str(), &body);
    Ok((id, hash, receipt_key(identity_hash, operation, key.as_str())))
}

/// The keys a run route reads first, for the transport to fetch with the principal:
/// the run, for a mutation the receipt of its key (scoped by the token identity), and
/// for a continue the run's chat slot (whether a bound chat's snapshot is to be framed).
pub fn prefetch_keys(identity_hash: &str, run_id: &str, mutation: Option<(RunMutation, &str)>) -> Vec<Key> {
    let Some(id) = RunId::parse(run_id) else { return vec![] };
    let mut keys = vec![run_key(id.as_str())];
    if let Some((op, idem)) = mutation.filter(|(_, k)| IdempotencyKey::parse(k).is_some()) {
        let op = match op {
            RunMutation::Continue => OP_CONTINUE,
            RunMutation::Cancel => OP_CANCEL,
        };
        keys.push(receipt_key(identity_hash, op, idem));
        if op == OP_CONTINUE {
            keys.push(crate::service::records::rooms::run_chat_slot(id.as_str()));
        }
    }
    keys
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMutation {
    Continue,
    Cancel,
}

fn completed(status: u16, body: &Value, replayed: bool) -> Mutation<RunView> {
    Mutation::answered(status, body.clone(), replayed)
}

/// Runs: start, reads, continue (the turn through the executor) and the endings.
#[derive(Clone)]
pub struct RunService {
    ctx: Ctx,
    executor: Arc<dyn TurnExecutor>,
    /// Process-local cancellation of running turns, by run id.
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
    sources: SourceService,
    /// Where an asynchronous turn runs when this process may not outlive its response
    /// (a Lambda invocation): set once at start by the functions that take turns.
    worker: Arc<std::sync::OnceLock<Arc<dyn TurnDispatch>>>,
}

impl std::ops::Deref for RunService {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        &self.ctx
    }
}

impl RunService {
    pub(crate) fn new(ctx: Ctx, executor: Arc<dyn TurnExecutor>, sources: SourceService) -> Self {
        Self { ctx, executor, running: Arc::new(Mutex::new(HashMap::new())), sources, worker: Arc::default() }
    }

    /// What an existing receipt answers for a retry carrying `request_hash`.
    pub(super) fn answer_from_receipt(&self, item: &Item, request_hash: &str) -> Result<Mutation<RunView>, ApiError> {
        answer_from_receipt(item, request_hash, self.clock.epoch()).map(Mutation::from)
    }

    /// The actor's run, from the authentication read when the transport prefetched it.
    async fn owned_run(&self, actor: &Actor, run_id: &str) -> Result<Run, ApiError> {
        let id = RunId::parse(run_id).ok_or(ApiError::NotFound)?;
        let key = run_key(id.as_str());
        let item = match actor.prefetched(&key) {
            Some(item) => item,
            None => self.store.get(&key).await?,
        };
        actor.owns(&item.ok_or(ApiError::NotFound)?)
    }

    // ---------- start ----------

    pub async fn start_run(
        &self,
        p: &Caller,
        key: &IdempotencyKey,
        req: StartRequest,
    ) -> Result<Mutation<RunView>, ApiError> {
        // A refusal names the data scopes' OAuth scopes too: the whole set the start needs.
        p.require_all(&[RUNS_WRITE], &oauth_scopes_of(&req.database_scope, &self.config.database_scopes))?;
        let body = serde_json::to_value(&req).map_err(ApiError::internal)?;
        let hash = request_hash(&p.owner_hash(), OP_START, "", &body);
        let spec = req.validate()?;
        let admitted = self.admit_scopes(p, &spec.database_scope, None)?;
        let families: Vec<&str> = admitted.iter().map(|s| s.evidence_family).collect();
        let now = self.clock.now();
        let id = RunId::generate();
        let mut run = Run::new(&id, p.owner_hash(), p.ownership(), spec, &families, now);
        let mut log = EventLog::after(id.as_str(), 0, now);
        log.push(
            1,
            EventData::RunStarted(RunStarted {
                database_scope: run.database_scope.clone(),
                max_steps: run.budget.max_steps,
            }),
        );
        run.last_seq = log.last_seq();
        let rkey = receipt_key(&p.identity_hash(), OP_START, key.as_str());
        // The account's listing entry is written with the run, so a listed run always exists
        // and every run started from now on is listed.
        let entry = account_run_item(&p.account_id, &run);
        match self.commit(&rkey, &hash, 201, &run, RunWrite::Create { listing: entry }, &log.events).await? {
            Commit::Done(m) => Ok(m),
            // A fresh random run id cannot exist: a collision is an internal fault.
            Commit::RunChanged => Err(ApiError::internal(std::io::Error::other("run id collision"))),
        }
    }

    // ---------- reads ----------

    /// The actor's run as inspect shows it (observed: a run held by a turn reads
    /// `running`); [`crate::domain::wire::RunJson::of`] is its bearer form.
    pub async fn inspect_run(&self, actor: &Actor, run_id: &str) -> Result<RunView, ApiError> {
        actor.require(&[RUNS_READ])?;
        Ok(RunView::observed(&self.owned_run(actor, run_id).await?, self.clock.epoch()))
    }

    /// `helix.agent_run.evidence_bundle.v1` of the actor's run.
    pub async fn run_evidence(&self, actor: &Actor, run_id: &str) -> Result<EvidenceBundleView, ApiError> {
        actor.require(&[RUNS_READ])?;
        Ok(EvidenceBundleView::of(&self.owned_run(actor, run_id).await?))
    }

    /// One page of the actor's run's events (`helix.agent_run.event_page.v1`).
    pub async fn list_events(
        &self,
        actor: &Actor,
        run_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<EventPageView, ApiError> {
        actor.require(&[RUNS_READ])?;
        crate::domain::run::check_event_limit(limit)?;
        let run = self.owned_run(actor, run_id).await?;
        let page = events_after(&*self.store, &run.run_id, after_seq, limit as usize).await?;
        Ok(EventPageView::new(&run.run_id, page.events, after_seq, page.has_more))
    }

    /// The run and the receipt: on a first read, from the authentication read when the
    /// transport prefetched them; otherwise (or on a re-read) one BatchGetItem.
    async fn read_run_and_receipt(
        &self,
        p: Option<&Caller>,
        run_id: &str,
        rkey: &Key,
        first_read: bool,
    ) -> Result<(Option<Item>, Option<Item>), ApiError> {
        let rk = run_key(run_id);
        if let (true, Some(p)) = (first_read, p)
            && let (Some(run), Some(receipt)) = (p.prefetched(&rk), p.prefetched(rkey))
        {
            return Ok((run, receipt));
        }
        let mut got = self.store.batch_get(&[rk, rkey.clone()]).await?.into_iter();
        Ok((got.next().flatten(), got.next().flatten()))
    }
}

/// How a mutation writes its run.
enum RunWrite {
    /// A new run (absent before), with the account's listing entry for it.
    Create { listing: Item },
    /// An existing run, compare-and-set on the revision it was read at.
    Update { rev: u64 },
}

/// The outcome of committing a completed mutation.
enum Commit {
    Done(Mutation<RunView>),
    /// The run changed since it was read (its compare-and-set failed).
    RunChanged,
}

impl RunService {
    /// Commits a completed mutation in one transaction: a new receipt holding the
    /// response, the run as `write` says, and the mutation's events. A receipt that
    /// already exists answers as a retry of that key (replay, conflict, in progress).
    async fn commit(
        &self,
        rkey: &Key,
        hash: &str,
        status: u16,
        run: &Run,
        write: RunWrite,
        events: &[Event],
    ) -> Result<Commit, ApiError> {
        let response = run.to_public();
        let done = Completion {
            receipt_key: rkey,
            request_hash: hash,
            status,
            response: &response,
            run_id: Some(&run.run_id),
            expires_at: self.receipt_expiry(),
        };
        let mut tx = Tx::new();
        match write {
            RunWrite::Create { listing } => {
                tx.put(Role::Run, run_item(run)?, Cond::NotExists);
                tx.put(Role::AccountEntry, listing, Cond::NotExists);
            }
            RunWrite::Update { rev } => {
                tx.put(Role::Run, run_item(run)?, run_unchanged(rev));
            }
        }
        push_events(&mut tx, events)?;
        match commit_once(&*self.store, self.clock.epoch(), done, tx).await? {
            Committed::Answered(m) => Ok(Commit::Done(m)),
            Committed::Refused(_) => Ok(Commit::RunChanged),
        }
    }
}

fn owned(p: &Caller, item: &Item) -> Result<Run, ApiError> {
    owned_by(&p.owner_hash(), item)
}

/// The run in `item` if it belongs to `owner_hash`: another owner's run is
/// indistinguishable from a missing one.
pub(super) fn owned_by(owner_hash: &str, item: &Item) -> Result<Run, ApiError> {
    if !is_owned_by(item, owner_hash) {
        return Err(ApiError::NotFound);
    }
    run_from_item(item)
}

/// A mutation needs a nonterminal run at exactly the expected version.
fn check_mutable(run: &Run, expected_version: u64) -> Result<(), ApiError> {
    if run.is_terminal() {
        return Err(ApiError::RunNotContinuable { status: run.completion_status.as_str() });
    }
    if run.version != expected_version {
        return Err(ApiError::VersionConflict { current: run.version });
    }
    Ok(())
}

/// The mutation's events, each put when absent.
fn push_events(tx: &mut Tx, events: &[Event]) -> Result<(), ApiError> {
    for e in events {
        tx.put(Role::Event, event_item(e)?, Cond::NotExists);
    }
    Ok(())
}

/// Runs a mutation's writes in a task of their own, so that a caller who goes away (a
/// client timeout or closed socket drops the handler future) cannot abort them between
/// claim and finalize: the task runs to its end and its receipt answers the retry.
/// The task keeps the request's tracing span, so its log lines stay tied to the request.
async fn detached<T: Send + 'static>(
    work: impl Future<Output = Result<T, ApiError>> + Send + 'static,
) -> Result<T, ApiError> {
    use tracing::Instrument;
    tokio::spawn(work.in_current_span()).await.map_err(ApiError::internal)?
}
