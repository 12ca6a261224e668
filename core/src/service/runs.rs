//! Run use cases. Every mutation is idempotent (receipt), versioned (public
//! `version`) and guarded by a compare-and-set on the run's `rev`:
//! start = 1 transaction; continue = read, claim transaction, turn, finalize
//! transaction; cancel = read, 1 transaction. See docs/round-trips.md.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::domain::event::{Event, EventKind, EventLog};
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::run::{CancelRequest, Claim, ContinueRequest, Run, StartRequest};
use crate::domain::scopes::{self, DataScope, RUNS_READ, RUNS_WRITE, admit};
use crate::domain::turn::{TurnContext, TurnFailure, apply_turn};
use crate::domain::{hash_parts, random_hex};
use crate::error::ApiError;
use crate::executor::{TURN_REQUEST_SCHEMA, TurnRequest};
use crate::store::{CancelReason, Cond, Item, Key, StoreError, WriteOp};

use super::records::*;
use super::{Caller, Mutation, Services};

const OP_START: &str = "run.start";
const OP_CONTINUE: &str = "run.continue";
const OP_CANCEL: &str = "run.cancel";
pub const DEFAULT_EVENT_LIMIT: u32 = 50;
const FINALIZE_ATTEMPTS: u32 = 3;

/// Optional per-invocation limits the transport knows (Lambda remaining time).
#[derive(Debug, Clone, Copy, Default)]
pub struct Invocation {
    pub remaining: Option<StdDuration>,
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
    let id = RunId::parse(run_id).ok_or(ApiError::NotFound)?;
    let body = serde_json::to_value(req).map_err(ApiError::internal)?;
    let hash = request_hash(&p.owner_hash(), operation, id.as_str(), &body);
    Ok((id, hash, receipt_key(&p.identity_hash(), operation, key.as_str())))
}

/// The keys a run route reads first, for the transport to fetch with the principal:
/// the run, and for a mutation the receipt of its key (scoped by the token identity).
pub fn prefetch_keys(identity_hash: &str, run_id: &str, mutation: Option<(RunMutation, &str)>) -> Vec<Key> {
    let Some(id) = RunId::parse(run_id) else { return vec![] };
    let mut keys = vec![run_key(id.as_str())];
    if let Some((op, idem)) = mutation.filter(|(_, k)| IdempotencyKey::parse(k).is_some()) {
        let op = match op {
            RunMutation::Continue => OP_CONTINUE,
            RunMutation::Cancel => OP_CANCEL,
        };
        keys.push(receipt_key(identity_hash, op, idem));
    }
    keys
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMutation {
    Continue,
    Cancel,
}

fn scope_error(e: scopes::ScopeRefusal) -> ApiError {
    ApiError::DataScopeNotAdmitted(match e {
        scopes::ScopeRefusal::NotEnabled(s) => format!("{s} is not enabled by this deployment"),
        scopes::ScopeRefusal::NotInCatalog(s) => format!("{s} is not a known logical scope"),
        scopes::ScopeRefusal::NotEntitled { scope, oauth_scope } => {
            format!("{scope} needs the OAuth scope {oauth_scope}")
        }
        scopes::ScopeRefusal::CapabilityUnavailable { scope, capability } => {
            format!("{scope} needs {capability}, which the account policy withholds")
        }
    })
}

fn completed(status: u16, body: &Value, replayed: bool) -> Mutation {
    Mutation { status, body: body.clone(), replayed }
}

impl Services {
    fn admit_scopes(&self, p: &Caller, requested: &[String]) -> Result<Vec<&'static DataScope>, ApiError> {
        admit(requested, &self.config.database_scopes, &p.scopes, |c| p.capability_available(c)).map_err(scope_error)
    }

    fn receipt_expiry(&self) -> i64 {
        self.clock.epoch() + RECEIPT_TTL_SECS
    }

    /// What an existing receipt answers for a retry carrying `request_hash`.
    fn answer_from_receipt(&self, item: &Item, request_hash: &str) -> Result<Mutation, ApiError> {
        let receipt = Receipt::from_item(item)?;
        if receipt.request_hash != request_hash {
            return Err(ApiError::IdempotencyConflict);
        }
        match receipt.state {
            ReceiptState::Completed { status, body } => {
                let body = serde_json::from_str(&body).map_err(ApiError::internal)?;
                Ok(completed(status, &body, true))
            }
            ReceiptState::InProgress { .. } if receipt.lease_until > self.clock.epoch() => {
                Err(ApiError::IdempotencyInProgress)
            }
            ReceiptState::InProgress { .. } => Err(ApiError::OutcomeUnknown { run_id: receipt.run_id }),
        }
    }

    /// The caller's run, from the authentication read when the transport prefetched it.
    async fn owned_run(&self, p: &Caller, run_id: &str) -> Result<Run, ApiError> {
        let id = RunId::parse(run_id).ok_or(ApiError::NotFound)?;
        let key = run_key(id.as_str());
        let item = match p.prefetched(&key) {
            Some(item) => item,
            None => self.store.get(&key).await?,
        };
        owned(p, &item.ok_or(ApiError::NotFound)?)
    }

    // ---------- start ----------

    pub async fn start_run(&self, p: &Caller, key: &IdempotencyKey, req: StartRequest) -> Result<Mutation, ApiError> {
        p.require(&[RUNS_WRITE])?;
        let body = serde_json::to_value(&req).map_err(ApiError::internal)?;
        let hash = request_hash(&p.owner_hash(), OP_START, "", &body);
        let spec = req.validate()?;
        let admitted = self.admit_scopes(p, &spec.database_scope)?;
        let families: Vec<&str> = admitted.iter().map(|s| s.evidence_family).collect();
        let now = self.clock.now();
        let id = RunId::generate();
        let mut run = Run::new(&id, p.owner_hash(), p.ownership(), spec, &families, now);
        let mut log = EventLog::after(id.as_str(), 0, now);
        log.push(
            EventKind::RunStarted,
            1,
            json!({ "database_scope": run.database_scope, "max_steps": run.budget.max_steps }),
        );
        run.last_seq = log.last_seq();
        let rkey = receipt_key(&p.identity_hash(), OP_START, key.as_str());
        match self.commit(&rkey, &hash, 201, &run, Cond::NotExists, &log.events).await? {
            Commit::Done(m) => Ok(m),
            // A fresh random run id cannot exist: a collision is an internal fault.
            Commit::RunChanged => Err(ApiError::internal(std::io::Error::other("run id collision"))),
        }
    }

    // ---------- reads ----------

    pub async fn inspect_run(&self, p: &Caller, run_id: &str) -> Result<Value, ApiError> {
        p.require(&[RUNS_READ])?;
        Ok(self.owned_run(p, run_id).await?.observed(self.clock.epoch()))
    }

    pub async fn run_evidence(&self, p: &Caller, run_id: &str) -> Result<Value, ApiError> {
        p.require(&[RUNS_READ])?;
        Ok(self.owned_run(p, run_id).await?.evidence_bundle())
    }

    pub async fn list_events(&self, p: &Caller, run_id: &str, after_seq: u64, limit: u32) -> Result<Value, ApiError> {
        p.require(&[RUNS_READ])?;
        if !(1..=200).contains(&limit) {
            return Err(ApiError::InvalidRequest("limit: must be 1-200".into()));
        }
        let run = self.owned_run(p, run_id).await?;
        let after = (after_seq > 0).then(|| event_sk(after_seq));
        let page = self.store.query(&run_key(&run.run_id).pk, "EVT#", after.as_deref(), limit as usize).await?;
        let events = page.items.iter().map(event_from_item).collect::<Result<Vec<Event>, _>>()?;
        let next = events.last().map(|e| e.seq).unwrap_or(after_seq);
        Ok(json!({
            "schema": "helix.agent_run.event_page.v1",
            "run_id": run.run_id,
            "events": events,
            "next_after_seq": next,
            "has_more": page.has_more,
        }))
    }

    // ---------- cancel ----------

    pub async fn cancel_run(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
        req: CancelRequest,
    ) -> Result<Mutation, ApiError> {
        p.require(&[RUNS_WRITE])?;
        req.validate()?;
        let (id, hash, rkey) = run_mutation(p, OP_CANCEL, run_id, key, &req)?;
        // A claim taken between our read and our write changes `rev` but not the
        // version; re-read and try again a bounded number of times.
        for attempt in 0..4 {
            let (run_item_now, receipt) = self.read_run_and_receipt(p, id.as_str(), &rkey, attempt == 0).await?;
            if let Some(existing) = receipt {
                return self.answer_from_receipt(&existing, &hash);
            }
            let run = owned(p, &run_item_now.ok_or(ApiError::NotFound)?)?;
            check_mutable(&run, req.expected_version)?;
            let data = json!({ "reason_included": req.reason.is_some(), "reason": req.reason });
            match self.end_run(run, &rkey, &hash, Run::cancel, EventKind::RunCancelled, data).await? {
                Commit::Done(m) => {
                    if !m.replayed
                        && let Some(token) = self.running.lock().expect("running map").get(id.as_str())
                    {
                        token.cancel();
                    }
                    return Ok(m);
                }
                Commit::RunChanged => continue, // re-evaluate from a fresh read
            }
        }
        Err(ApiError::RunBusy)
    }

    /// The run and the receipt: on a first read, from the authentication read when the
    /// transport prefetched them; otherwise (or on a re-read) one BatchGetItem.
    async fn read_run_and_receipt(
        &self,
        p: &Caller,
        run_id: &str,
        rkey: &Key,
        first_read: bool,
    ) -> Result<(Option<Item>, Option<Item>), ApiError> {
        let rk = run_key(run_id);
        if let (true, Some(run), Some(receipt)) = (first_read, p.prefetched(&rk), p.prefetched(rkey)) {
            return Ok((run, receipt));
        }
        let mut got = self.store.batch_get(&[rk, rkey.clone()]).await?.into_iter();
        Ok((got.next().flatten(), got.next().flatten()))
    }

    // ---------- continue ----------

    pub async fn continue_run(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
        req: ContinueRequest,
        invocation: Invocation,
    ) -> Result<Mutation, ApiError> {
        p.require(&[RUNS_WRITE])?;
        req.validate()?;
        let (id, hash, rkey) = run_mutation(p, OP_CONTINUE, run_id, key, &req)?;

        let (item, receipt) = self.read_run_and_receipt(p, id.as_str(), &rkey, true).await?;
        if let Some(existing) = receipt {
            return self.answer_from_receipt(&existing, &hash);
        }
        let run = owned(p, &item.ok_or(ApiError::NotFound)?)?;
        check_mutable(&run, req.expected_version)?;
        if run.live_claim(self.clock.epoch()).is_some() {
            return Err(ApiError::RunBusy);
        }
        req.check_answers(&run.pending_questions)?;
        let admitted = self.admit_scopes(p, &run.database_scope)?;

        if run.is_expired(self.clock.now()) {
            return self.exhaust(run, &rkey, &hash).await;
        }

        // Claim: reservation + run CAS in one transaction. The claim does not bump the
        // public version, so a concurrent caller with the same version gets run_busy.
        let claim_token = random_hex(16);
        let lease_until = self.clock.epoch() + self.config.lease().as_secs() as i64;
        let recovered = run.claim.is_some();
        let mut claimed = run.clone();
        claimed.claim = Some(Claim { token: claim_token.clone(), lease_until, key_ref: rkey.pk.clone() });
        claimed.rev += 1;
        let reservation = Receipt {
            request_hash: hash.clone(),
            state: ReceiptState::InProgress { claim_token: claim_token.clone() },
            run_id: Some(run.run_id.clone()),
            lease_until,
            expires_at: self.receipt_expiry(),
        };
        let ops = vec![
            WriteOp::Put { item: reservation.to_item(&rkey), cond: Some(Cond::NotExists) },
            WriteOp::Put { item: run_item(&claimed)?, cond: Some(run_unchanged(run.rev)) },
        ];
        match self.store.transact(ops).await {
            Ok(()) => {}
            Err(StoreError::TransactionCanceled { reasons }) => {
                if let Some(CancelReason::ConditionFailed { current: Some(existing) }) = reasons.first() {
                    return self.answer_from_receipt(existing, &hash);
                }
                return Err(match reasons.get(1) {
                    Some(CancelReason::ConditionFailed { current: Some(now_item) }) => {
                        let current = run_from_item(now_item)?;
                        check_mutable(&current, req.expected_version).err().unwrap_or(ApiError::RunBusy)
                    }
                    _ => ApiError::RunBusy,
                });
            }
            Err(e) => return Err(e.into()),
        }

        // Execute one turn under the effective deadline, cancellable in-process.
        let step = run.budget.steps_used + 1;
        let deadline = self.deadline(&run, invocation);
        let families: Vec<String> = admitted.iter().map(|s| s.evidence_family.to_owned()).collect();
        let turn = TurnRequest {
            schema: TURN_REQUEST_SCHEMA.into(),
            run_id: run.run_id.clone(),
            step,
            claim_token: claim_token.clone(),
            objective: run.objective.clone(),
            constraints: run.constraints.clone(),
            instruction: req.instruction.clone().filter(|i| !i.trim().is_empty()),
            answers: req.answers.clone(),
            capabilities: admitted.iter().flat_map(|s| s.capabilities.iter().map(|c| c.to_string())).collect(),
            required_evidence_families: families.clone(),
            prior_evidence_refs: run.evidence.evidence_refs.clone(),
            deadline: deadline.1,
        };
        let turn_started = std::time::Instant::now();
        let outcome = self.execute_turn(&run.run_id, turn, deadline.0).await;
        tracing::info!(
            run_id = %run.run_id,
            step,
            failure = outcome.as_ref().err().map(|f| f.code()).unwrap_or("none"),
            turn_ms = turn_started.elapsed().as_millis() as u64,
            budget_ms = deadline.0.as_millis() as u64,
            "turn"
        );

        // Finalize: CAS on the claimed rev; events and receipt in the same transaction.
        let now = self.clock.now();
        let mut done = claimed.clone();
        let mut log = EventLog::after(&done.run_id, done.last_seq, now);
        let ctx = TurnContext {
            step,
            claim_token: &claim_token,
            instruction: req.instruction.as_deref(),
            answers: &req.answers,
            required_families: &families,
            recovered,
            now,
        };
        apply_turn(&mut done, &ctx, outcome, &self.config.trusted_terminal_keys, &mut log);
        done.rev += 1;
        done.last_seq = log.last_seq();
        let response = done.to_public();
        let finished = Receipt {
            request_hash: hash.clone(),
            state: ReceiptState::Completed { status: 200, body: response.to_string() },
            run_id: Some(done.run_id.clone()),
            lease_until,
            expires_at: self.receipt_expiry(),
        };
        let mine = Cond::eq_s("claim_token", &claim_token);
        let mut ops = vec![
            WriteOp::Put { item: finished.to_item(&rkey), cond: Some(mine.clone()) },
            WriteOp::Put { item: run_item(&done)?, cond: Some(run_unchanged(claimed.rev)) },
        ];
        ops.extend(event_ops(&log.events)?);
        // A cancellation without a failed condition (DynamoDB's TransactionConflict when
        // a competing claim touches the run at the same instant) is retried: only a
        // failed condition proves the claim was lost.
        for attempt in 1..=FINALIZE_ATTEMPTS {
            match self.store.transact(ops.clone()).await {
                Ok(()) => return Ok(completed(200, &response, false)),
                Err(StoreError::TransactionCanceled { reasons })
                    if !reasons.iter().any(|r| matches!(r, CancelReason::ConditionFailed { .. }))
                        && attempt < FINALIZE_ATTEMPTS =>
                {
                    tokio::time::sleep(StdDuration::from_millis(25 * attempt as u64)).await;
                }
                Err(StoreError::TransactionCanceled { reasons })
                    if reasons.iter().any(|r| matches!(r, CancelReason::ConditionFailed { .. })) =>
                {
                    return self.discard_stale_turn(p, &done.run_id, &rkey, &finished, mine).await;
                }
                // Still contended: the reservation stays in progress and expires into
                // outcome_unknown; the next continuation recovers the run.
                Err(e) => return Err(ApiError::Unavailable(Box::new(e))),
            }
        }
        unreachable!("the last attempt always returns")
    }

    /// The turn lost its claim (cancelled meanwhile, or the lease expired and another
    /// continuation recovered the run): its result is discarded. The reservation is
    /// completed with the typed refusal so a retry with this key replays it.
    async fn discard_stale_turn(
        &self,
        p: &Caller,
        run_id: &str,
        rkey: &Key,
        finished: &Receipt,
        mine: Cond,
    ) -> Result<Mutation, ApiError> {
        // A fresh read: the prefetched run predates the turn.
        let item = self.store.get(&run_key(run_id)).await?.ok_or(ApiError::NotFound)?;
        let current = owned(p, &item)?;
        let refusal = if current.is_terminal() {
            ApiError::RunNotContinuable { status: status_name(&current) }
        } else {
            ApiError::VersionConflict { current: current.version }
        };
        let body = refusal.body("stale-turn");
        let receipt = Receipt {
            state: ReceiptState::Completed { status: refusal.status().as_u16(), body: body.to_string() },
            ..finished.clone()
        };
        match self.store.put(receipt.to_item(rkey), Some(mine)).await {
            Ok(()) | Err(StoreError::ConditionFailed { .. }) => Err(refusal),
            Err(e) => Err(e.into()),
        }
    }

    async fn exhaust(&self, run: Run, rkey: &Key, hash: &str) -> Result<Mutation, ApiError> {
        let data = json!({ "reason": "expired", "steps_used": run.budget.steps_used });
        match self.end_run(run, rkey, hash, Run::exhaust, EventKind::BudgetExhausted, data).await? {
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
        kind: EventKind,
        data: Value,
    ) -> Result<Commit, ApiError> {
        let now = self.clock.now();
        let old_rev = run.rev;
        end(&mut run, now);
        run.rev += 1;
        let mut log = EventLog::after(&run.run_id, run.last_seq, now);
        log.push(kind, run.version, data);
        run.last_seq = log.last_seq();
        self.commit(rkey, hash, 200, &run, run_unchanged(old_rev), &log.events).await
    }

    /// Effective deadline: the earliest of the turn timeout, the run's expiry, the
    /// Lambda's remaining time and the gateway limit, minus a margin.
    fn deadline(&self, run: &Run, invocation: Invocation) -> (StdDuration, DateTime<Utc>) {
        let now = self.clock.now();
        let until_expiry = (run.budget.expires_at - now).to_std().unwrap_or_default();
        let mut budget = self.config.turn_timeout.min(until_expiry);
        for limit in [invocation.remaining, self.config.gateway_timeout].into_iter().flatten() {
            budget = budget.min(limit);
        }
        let budget = budget.saturating_sub(self.config.deadline_margin).max(StdDuration::from_millis(100));
        (budget, now + chrono::Duration::from_std(budget).unwrap_or_default())
    }

    async fn execute_turn(
        &self,
        run_id: &str,
        turn: TurnRequest,
        budget: StdDuration,
    ) -> Result<crate::domain::turn::TurnArtifact, TurnFailure> {
        let token = CancellationToken::new();
        self.running.lock().expect("running map").insert(run_id.to_owned(), token.clone());
        // A cancel committed through another process reaches this turn through the store.
        let _watch = self.store.is_shared().then(|| {
            let every = super::cancel_watch::POLL_INTERVAL;
            super::cancel_watch::watch(self.store.clone(), run_id, &turn.claim_token, token.clone(), every)
        });
        let result = tokio::select! {
            r = self.executor.execute(turn, token.clone()) => r,
            _ = tokio::time::sleep(budget) => Err(TurnFailure::TurnTimeout),
            _ = token.cancelled() => Err(TurnFailure::TurnTimeout),
        };
        token.cancel(); // tell a still-running executor to stop
        self.running.lock().expect("running map").remove(run_id);
        result
    }
}

/// The outcome of committing a completed mutation.
enum Commit {
    Done(Mutation),
    /// The run changed since it was read (its compare-and-set failed).
    RunChanged,
}

impl Services {
    /// Commits a completed mutation in one transaction: a new receipt holding the
    /// response, the run under `run_cond`, and the mutation's events. A receipt that
    /// already exists answers as a retry of that key (replay, conflict, in progress).
    async fn commit(
        &self,
        rkey: &Key,
        hash: &str,
        status: u16,
        run: &Run,
        run_cond: Cond,
        events: &[Event],
    ) -> Result<Commit, ApiError> {
        let response = run.to_public();
        let receipt = Receipt {
            request_hash: hash.to_owned(),
            state: ReceiptState::Completed { status, body: response.to_string() },
            run_id: Some(run.run_id.clone()),
            lease_until: 0,
            expires_at: self.receipt_expiry(),
        };
        let mut ops = vec![
            WriteOp::Put { item: receipt.to_item(rkey), cond: Some(Cond::NotExists) },
            WriteOp::Put { item: run_item(run)?, cond: Some(run_cond) },
        ];
        ops.extend(event_ops(events)?);
        match self.store.transact(ops).await {
            Ok(()) => Ok(Commit::Done(completed(status, &response, false))),
            Err(StoreError::TransactionCanceled { reasons }) => match reasons.first() {
                Some(CancelReason::ConditionFailed { current: Some(existing) }) => {
                    self.answer_from_receipt(existing, hash).map(Commit::Done)
                }
                // Another request with this key is being written at this instant.
                Some(CancelReason::Other(_)) => Err(ApiError::IdempotencyInProgress),
                _ => Ok(Commit::RunChanged),
            },
            Err(e) => Err(e.into()),
        }
    }
}

fn owned(p: &Caller, item: &Item) -> Result<Run, ApiError> {
    // Another owner's run is indistinguishable from a missing one.
    if item.s("owner_hash") != Some(p.owner_hash().as_str()) {
        return Err(ApiError::NotFound);
    }
    run_from_item(item)
}

fn status_name(run: &Run) -> &'static str {
    use crate::domain::run::Completion::*;
    match run.completion_status {
        Completed => "completed",
        Failed => "failed",
        BudgetExhausted => "budget_exhausted",
        Cancelled => "cancelled",
        _ => "active",
    }
}

/// A mutation needs a nonterminal run at exactly the expected version.
fn check_mutable(run: &Run, expected_version: u64) -> Result<(), ApiError> {
    if run.is_terminal() {
        return Err(ApiError::RunNotContinuable { status: status_name(run) });
    }
    if run.version != expected_version {
        return Err(ApiError::VersionConflict { current: run.version });
    }
    Ok(())
}

fn event_ops(events: &[Event]) -> Result<Vec<WriteOp>, ApiError> {
    events.iter().map(|e| Ok(WriteOp::Put { item: event_item(e)?, cond: Some(Cond::NotExists) })).collect()
}
