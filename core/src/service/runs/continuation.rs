//! Continue: read -> checks -> claim (transaction) -> execute one turn -> finalize
//! (transaction). Everything after the shape checks runs in its own task, so a caller
//! who goes away mid-turn cannot abort a claimed turn before its finalize.

use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Invocation, OP_CONTINUE, check_mutable, completed, detached, owned, owned_by, push_events, run_mutation};
use crate::domain::event::EventLog;
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::random_hex;
use crate::domain::run::{Claim, ContinueRequest, Run};
use crate::domain::scopes::{DataScope, RUNS_WRITE};
use crate::domain::source::{PROBE_FAMILY, PROBE_SCOPE, ROOM_EVIDENCE_FAMILY};

const BOUND_ROOM_EVIDENCE: &str = "bound_room_evidence";
/// The refs the service itself issued to one turn, per evidence family.
type IssuedRefs = Vec<(String, Vec<String>)>;
use super::RunService;
use super::approval::ApprovedMutation;
use crate::domain::approval::TurnBinding;
use crate::domain::turn::{TurnArtifact, TurnContext, TurnFailure, apply_turn};
use crate::domain::wire::RunView;
use crate::error::ApiError;
use crate::executor::{TURN_REQUEST_SCHEMA, TurnRequest};
use crate::service::records::receipts::held_by;
use crate::service::records::{Receipt, ReceiptState, Role, Tx, run_from_item, run_item, run_key, run_unchanged};
use crate::service::sources::probes::PROBE_EXECUTOR_RESERVE;
use crate::service::{Caller, Mutation};
use crate::store::{Cond, Key, StoreError};

/// A finalize cancelled without a failed condition is retried this many times in all.
const FINALIZE_ATTEMPTS: u32 = 3;

/// One continuation request past its shape checks: what every step needs.
pub(super) struct Continuation {
    pub(super) hash: String,
    pub(super) rkey: Key,
    pub(super) req: ContinueRequest,
    pub(super) invocation: Invocation,
    /// The turn runs outside its request (`Prefer: respond-async`): no gateway in front of
    /// it limits its deadline.
    pub(super) background: bool,
}

impl Continuation {
    /// A continue request's checks before any read (the write scope, the request's own
    /// rules, the run id and the key's receipt), and the continuation they admit; a
    /// background one is not bounded by its request's limits.
    pub(super) fn checked(
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
        req: ContinueRequest,
        invocation: Invocation,
        background: bool,
    ) -> Result<(RunId, Continuation), ApiError> {
        p.require(&[RUNS_WRITE])?;
        req.validate()?;
        let (id, hash, rkey) = run_mutation(p, OP_CONTINUE, run_id, key, &req)?;
        Ok((id, Continuation { hash, rkey, req, invocation, background }))
    }
}

/// Either the value the next step needs, or the answer the request already has
/// (a receipt's replay or refusal).
pub(super) enum Proceed<T> {
    With(T),
    Answered(Mutation<RunView>),
}

/// A turn whose claim is committed: from here it runs to its finalize.
pub(super) struct ClaimedTurn {
    /// The run as claimed (claim set, `rev` bumped; the public version unchanged).
    pub(super) claimed: Run,
    pub(super) token: String,
    lease_until: i64,
    /// The run held an expired claim that never finalized.
    recovered: bool,
    pub(super) families: Vec<String>,
    pub(super) capabilities: Vec<String>,
    admitted: Vec<&'static DataScope>,
}

impl ClaimedTurn {
    /// A turn whose claim (`claimed`, holding `token`) is committed, with the scopes its
    /// run was admitted to.
    pub(super) fn new(
        claimed: Run,
        token: String,
        lease_until: i64,
        recovered: bool,
        admitted: &[&'static DataScope],
    ) -> Self {
        Self {
            recovered,
            claimed,
            token,
            lease_until,
            families: admitted.iter().map(|s| s.evidence_family.to_owned()).collect(),
            capabilities: admitted.iter().flat_map(|s| s.capabilities.iter().map(|c| c.to_string())).collect(),
            admitted: admitted.to_vec(),
        }
    }

    /// The same turn under the claim token `token` it took over (`claimed` holds it).
    pub(super) fn reclaimed(self, claimed: Run, token: String) -> Self {
        Self { claimed, token, ..self }
    }

    /// Whether the claim took over a run whose earlier claim had expired unfinalized.
    pub(super) fn recovered(&self) -> bool {
        self.recovered
    }
}

impl RunService {
    pub async fn continue_run(
        &self,
        p: &Caller,
        run_id: &str,
        key: &IdempotencyKey,
        req: ContinueRequest,
        invocation: Invocation,
    ) -> Result<Mutation<RunView>, ApiError> {
        let (id, c) = Continuation::checked(p, run_id, key, req, invocation, false)?;
        let (this, p) = (self.clone(), p.clone());
        detached(async move { this.continuation(&p, id, c).await }).await
    }

    /// The steps of one continuation, in order.
    async fn continuation(&self, p: &Caller, id: RunId, c: Continuation) -> Result<Mutation<RunView>, ApiError> {
        match self.claimed_turn(p, &id, &c).await? {
            Proceed::With(turn) => self.run_claimed_turn(p, &c, turn).await,
            Proceed::Answered(m) => Ok(m),
        }
    }

    /// The steps up to a committed claim: the receipt's answer, the checks, the scopes'
    /// admission, an expired run's ending, then the claim transaction.
    pub(super) async fn claimed_turn(
        &self,
        p: &Caller,
        id: &RunId,
        c: &Continuation,
    ) -> Result<Proceed<ClaimedTurn>, ApiError> {
        let run = match self.continuable_run(p, id, c).await? {
            Proceed::With(run) => run,
            Proceed::Answered(m) => return Ok(Proceed::Answered(m)),
        };
        let admitted = self.admit_scopes(p, &run.database_scope, Some(&run))?;
        if run.is_expired(self.clock.now()) {
            return self.exhaust(run, &c.rkey, &c.hash).await.map(Proceed::Answered);
        }
        self.claim_turn(run, &admitted, c).await
    }

    /// The steps after the claim: one turn through the executor, its governance, and
    /// the finalize that records it (or discards it when the claim was lost).
    pub(super) async fn run_claimed_turn(
        &self,
        p: &Caller,
        c: &Continuation,
        turn: ClaimedTurn,
    ) -> Result<Mutation<RunView>, ApiError> {
        let admitted = turn.admitted.clone();
        let step = turn.claimed.budget.steps_used + 1;
        // The turn's span (a trace's `turn`): the executor call and the store calls that
        // record its outcome. The step only: no objective, answer or artifact.
        let span = tracing::info_span!("turn", helix.step = step);
        async move {
            let (budget, deadline) = self.deadline(&turn.claimed, c.invocation, c.background);
            let started = Instant::now();
            let mut request = turn_request(&turn, &c.req, step, deadline);
            request.conversation_context = self.conversation_context(p, &request.run_id).await;
            let (outcome, issued) = if admitted.iter().any(|s| s.room_bound) {
                match self.execute_room_turn(p, request, budget, &admitted).await {
                    Ok((artifact, issued)) => (Ok(artifact), issued),
                    Err(failure) => (Err(failure), vec![]),
                }
            } else {
                (self.execute_turn(request, budget).await, vec![])
            };
            tracing::info!(
                run_id = %turn.claimed.run_id,
                step,
                failure = outcome.as_ref().err().map(|f| f.code()).unwrap_or("none"),
                turn_ms = started.elapsed().as_millis() as u64,
                budget_ms = budget.as_millis() as u64,
                "turn"
            );
            let binding = TurnBinding { run_id: &turn.claimed.run_id, step, claim_token: &turn.token };
            let admitted = (turn.capabilities.as_slice(), turn.families.as_slice());
            let (outcome, approved) = self.govern_turn(p, binding, admitted, outcome).await?;
            self.finalize_turn(&p.owner_hash(), c, turn, step, outcome, &issued, approved).await
        }
        .instrument(span)
        .await
    }

    /// The run, if this request may continue it: a receipt of the key answers first; then
    /// ownership, lifecycle and version, a live claim, and the answers' references.
    async fn continuable_run(&self, p: &Caller, id: &RunId, c: &Continuation) -> Result<Proceed<Run>, ApiError> {
        let (item, receipt) = self.read_run_and_receipt(Some(p), id.as_str(), &c.rkey, true).await?;
        if let Some(existing) = receipt {
            return self.answer_from_receipt(&existing, &c.hash).map(Proceed::Answered);
        }
        let run = owned(p, &item.ok_or(ApiError::NotFound)?)?;
        check_mutable(&run, c.req.expected_version)?;
        if run.live_claim(self.clock.epoch()).is_some() {
            return Err(ApiError::RunBusy);
        }
        c.req.check_answers(&run.pending_questions)?;
        Ok(Proceed::With(run))
    }

    /// Claim: reservation + run CAS in one transaction. The claim does not bump the
    /// public version, so a concurrent caller with the same version gets run_busy.
    async fn claim_turn(
        &self,
        run: Run,
        admitted: &[&'static DataScope],
        c: &Continuation,
    ) -> Result<Proceed<ClaimedTurn>, ApiError> {
        let token = random_hex(16);
        let lease_until = self.clock.epoch() + self.config.lease().as_secs() as i64;
        let mut claimed = run.clone();
        claimed.claim = Some(Claim { token: token.clone(), lease_until, key_ref: c.rkey.pk.clone() });
        claimed.rev += 1;
        let reservation = Receipt {
            request_hash: c.hash.clone(),
            state: ReceiptState::InProgress { claim_token: token.clone() },
            run_id: Some(run.run_id.clone()),
            lease_until,
            expires_at: self.receipt_expiry(),
        };
        let mut tx = Tx::new();
        tx.put(Role::Receipt, reservation.to_item(&c.rkey), Cond::NotExists).put(
            Role::Run,
            run_item(&claimed)?,
            run_unchanged(run.rev),
        );
        match tx.commit(&*self.store).await {
            Ok(()) => Ok(Proceed::With(ClaimedTurn::new(claimed, token, lease_until, run.claim.is_some(), admitted))),
            Err(f) if f.is_cancelled() => {
                if let Some(existing) = f.current(Role::Receipt) {
                    return self.answer_from_receipt(existing, &c.hash).map(Proceed::Answered);
                }
                Err(match f.current(Role::Run) {
                    Some(now_item) => {
                        let current = run_from_item(now_item)?;
                        check_mutable(&current, c.req.expected_version).err().unwrap_or(ApiError::RunBusy)
                    }
                    None => ApiError::RunBusy,
                })
            }
            Err(f) => Err(f.into()),
        }
    }

    /// The bound chat's snapshot, framed as quoted untrusted context (`None` for a run
    /// without an active chat binding or snapshot). The context is optional and grants
    /// nothing, so a failed read leaves it out rather than failing the turn.
    async fn conversation_context(&self, p: &Caller, run_id: &str) -> Option<crate::domain::turn::ConversationContext> {
        let slot = p.prefetched(&crate::service::records::rooms::run_chat_slot(run_id));
        let owner = p.owner_hash();
        match crate::service::records::rooms::bound_chat_snapshot(&*self.store, slot, run_id, &owner).await {
            Ok(snapshot) => crate::domain::turn::conversation_context(&snapshot),
            Err(e) => {
                tracing::warn!(run_id, error = %e, "chat snapshot unreadable: the turn goes without conversation context");
                None
            }
        }
    }

    /// Effective deadline: the earliest of the turn timeout, the run's expiry, the
    /// Lambda's remaining time and the gateway limit, minus a margin. A turn in the
    /// background answered no request, so no gateway limits it.
    fn deadline(&self, run: &Run, invocation: Invocation, background: bool) -> (StdDuration, DateTime<Utc>) {
        let now = self.clock.now();
        let until_expiry = (run.budget.expires_at - now).to_std().unwrap_or_default();
        let mut budget = self.config.turn_timeout.min(until_expiry);
        let gateway = self.config.gateway_timeout.filter(|_| !background);
        for limit in [invocation.remaining, gateway].into_iter().flatten() {
            budget = budget.min(limit);
        }
        let budget = budget.saturating_sub(self.config.deadline_margin).max(StdDuration::from_millis(100));
        (budget, now + chrono::Duration::from_std(budget).unwrap_or_default())
    }

    /// Registers this process's cancellation signal of a run's running turn and, on a
    /// shared store, the watch that carries a cancel committed through another process.
    /// Dropped, it unregisters.
    fn turn_signal(&self, run_id: &str, claim_token: &str) -> TurnSignal {
        let cancel = CancellationToken::new();
        self.running.lock().expect("running map").insert(run_id.to_owned(), cancel.clone());
        let watch = self.store.is_shared().then(|| {
            let every = crate::service::cancel_watch::POLL_INTERVAL;
            crate::service::cancel_watch::watch(self.store.clone(), run_id, claim_token, cancel.clone(), every)
        });
        TurnSignal { running: self.running.clone(), run_id: run_id.to_owned(), cancel, _watch: watch }
    }

    /// Executes one turn: the executor raced against the budget and this process's
    /// cancellation signal of the run (`running`). A turn stopped by its deadline is
    /// `turn_timeout`; one stopped by a cancellation of its run is `turn_cancelled`.
    async fn execute_turn(&self, turn: TurnRequest, budget: StdDuration) -> Result<TurnArtifact, TurnFailure> {
        // A cancel committed through another process reaches this turn through the store.
        let signal = self.turn_signal(&turn.run_id, &turn.claim_token);
        let cancel = signal.cancel.clone();
        let result = tokio::select! {
            // Checked first: a cancellation also ends the executor's own wait, and its
            // answer must not pass for a timeout.
            biased;
            _ = cancel.cancelled() => Err(TurnFailure::TurnCancelled),
            r = self.executor.execute(turn, cancel.clone()).instrument(tracing::info_span!("executor", otel.kind = "client")) => r,
            _ = tokio::time::sleep(budget) => Err(TurnFailure::TurnTimeout),
        };
        let cancelled = cancel.is_cancelled();
        cancel.cancel(); // tell a still-running executor to stop
        drop(signal);
        match result {
            Err(_) if cancelled => Err(TurnFailure::TurnCancelled),
            other => other,
        }
    }

    /// A turn of a room-bound run: the binding rechecks, then for `bound_room_evidence`
    /// the admitted observations and for `bound_room_environment_probe` the answered probe
    /// of the paired source (queued now, waited for within the turn's budget), then the
    /// executor, then the binding/membership/consent/room rechecks again just before the
    /// artifact is projected. A failed recheck (or an unanswered probe) fails the turn
    /// with its code. Returns the refs this turn was issued, per family.
    async fn execute_room_turn(
        &self,
        p: &Caller,
        mut request: TurnRequest,
        budget: StdDuration,
        admitted: &[&'static DataScope],
    ) -> Result<(TurnArtifact, IssuedRefs), TurnFailure> {
        let started = Instant::now();
        let holds = |id: &str| admitted.iter().any(|s| s.id == id);
        let bound = self.sources.recheck_room_binding(p, &request.run_id).await?;
        // Known from here on: the recheck before projection reads them with the slot at once.
        let (binding_ref, room_id) = (bound.binding_ref.clone(), bound.room_id.clone());
        let mut issued: IssuedRefs = vec![];
        if holds(PROBE_SCOPE) {
            let wait = self.config.sources.probe_wait.min(budget.saturating_sub(PROBE_EXECUTOR_RESERVE));
            // A cancellation of the run stops the wait, as it stops the executor.
            let signal = self.turn_signal(&request.run_id, &request.claim_token);
            let probe = self
                .sources
                .probe_room(&bound, &request.run_id, request.step, &request.claim_token, wait, &signal.cancel)
                .await;
            drop(signal);
            let probe = probe?;
            issued.push((PROBE_FAMILY.into(), vec![probe.answer.observation_ref.clone()]));
            request.room_probe = Some(probe);
        }
        if holds(BOUND_ROOM_EVIDENCE) {
            let evidence = self.sources.room_evidence_of(bound).await?;
            issued.push((
                ROOM_EVIDENCE_FAMILY.into(),
                evidence.observations.iter().map(|o| o.observation_ref.clone()).collect(),
            ));
            request.room_evidence = Some(evidence);
        }
        let run_id = request.run_id.clone();
        let left = budget.saturating_sub(started.elapsed()).max(StdDuration::from_millis(100));
        let artifact = self.execute_turn(request, left).await?;
        self.sources.recheck_bound_room(p, &run_id, &binding_ref, &room_id).await?;
        Ok((artifact, issued))
    }

    /// Finalize: CAS on the claimed rev; the turn's events, the completed receipt and an
    /// approved room mutation in the same transaction. Only a failed condition proves the
    /// claim was lost; a mutation whose target changed meanwhile fails the turn instead.
    #[allow(clippy::too_many_arguments)]
    async fn finalize_turn(
        &self,
        owner_hash: &str,
        c: &Continuation,
        turn: ClaimedTurn,
        step: u32,
        outcome: Result<TurnArtifact, TurnFailure>,
        issued: &[(String, Vec<String>)],
        approved: Option<ApprovedMutation>,
    ) -> Result<Mutation<RunView>, ApiError> {
        let now = self.clock.now();
        let mut done = turn.claimed.clone();
        let mut log = EventLog::after(&done.run_id, done.last_seq, now);
        let ctx = TurnContext {
            step,
            claim_token: &turn.token,
            instruction: c.req.instruction.as_deref(),
            answers: &c.req.answers,
            required_families: &turn.families,
            family_refs: issued,
            recovered: turn.recovered,
            now,
        };
        apply_turn(&mut done, &ctx, outcome, &self.config.trusted_terminal_keys, &mut log);
        done.rev += 1;
        done.last_seq = log.last_seq();
        let response = done.to_public();
        let finished = Receipt {
            request_hash: c.hash.clone(),
            state: ReceiptState::Completed { status: 200, body: response.to_string() },
            run_id: Some(done.run_id.clone()),
            lease_until: turn.lease_until,
            expires_at: self.receipt_expiry(),
        };
        let mine = held_by(&turn.token);
        let mut tx = Tx::new();
        tx.put(Role::Receipt, finished.to_item(&c.rkey), mine.clone()).put(
            Role::Run,
            run_item(&done)?,
            run_unchanged(turn.claimed.rev),
        );
        push_events(&mut tx, &log.events)?;
        if let Some(m) = &approved {
            m.apply(&mut tx, now);
        }
        // A cancellation without a failed condition (DynamoDB's TransactionConflict when
        // a competing claim touches the run at the same instant) is retried.
        for attempt in 1..=FINALIZE_ATTEMPTS {
            let failure = match tx.clone().commit(&*self.store).await {
                Ok(()) => return Ok(completed(200, &response, false)),
                Err(f) => f,
            };
            let lost_claim = [Role::Receipt, Role::Run, Role::Event].into_iter().any(|r| failure.failed(r));
            if failure.is_cancelled() && lost_claim {
                return self.discard_stale_turn(owner_hash, &done.run_id, &c.rkey, &finished, mine).await;
            }
            if failure.is_cancelled() && approved.is_some() && ApprovedMutation::refused(&failure) {
                let refused = Err(TurnFailure::RoomBindingMissing);
                return Box::pin(self.finalize_turn(owner_hash, c, turn, step, refused, issued, None)).await;
            }
            if failure.is_cancelled() && attempt < FINALIZE_ATTEMPTS {
                tokio::time::sleep(StdDuration::from_millis(25 * attempt as u64)).await;
                continue;
            }
            // Still contended: the reservation stays in progress and expires into
            // outcome_unknown; the next continuation recovers the run.
            return Err(ApiError::Unavailable(Box::new(failure.into_store_error())));
        }
        unreachable!("the last attempt always returns")
    }

    /// The turn lost its claim (cancelled meanwhile, or the lease expired and another
    /// continuation recovered the run): its result is discarded. The reservation is
    /// completed with the typed refusal so a retry with this key replays it.
    async fn discard_stale_turn(
        &self,
        owner_hash: &str,
        run_id: &str,
        rkey: &Key,
        finished: &Receipt,
        mine: Cond,
    ) -> Result<Mutation<RunView>, ApiError> {
        // A fresh read: the prefetched run predates the turn.
        let item = self.store.get(&run_key(run_id)).await?.ok_or(ApiError::NotFound)?;
        let current = owned_by(owner_hash, &item)?;
        let refusal = if current.is_terminal() {
            ApiError::RunNotContinuable { status: current.completion_status.as_str() }
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
}

/// A registered cancellation signal of one running turn (see `RunService::turn_signal`).
struct TurnSignal {
    running: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, CancellationToken>>>,
    run_id: String,
    cancel: CancellationToken,
    _watch: Option<crate::service::cancel_watch::Watch>,
}

impl Drop for TurnSignal {
    fn drop(&mut self) {
        self.running.lock().expect("running map").remove(&self.run_id);
    }
}

/// The executor's input for this turn: the admitted capabilities and families only.
fn turn_request(turn: &ClaimedTurn, req: &ContinueRequest, step: u32, deadline: DateTime<Utc>) -> TurnRequest {
    let run = &turn.claimed;
    TurnRequest {
        schema: TURN_REQUEST_SCHEMA.into(),
        mode: crate::executor::TurnMode::Read,
        run_id: run.run_id.clone(),
        step,
        claim_token: turn.token.clone(),
        objective: run.objective.clone(),
        constraints: run.constraints.clone(),
        instruction: req.instruction.clone().filter(|i| !i.trim().is_empty()),
        answers: req.answers.clone(),
        capabilities: turn.capabilities.clone(),
        required_evidence_families: turn.families.clone(),
        prior_evidence_refs: run.evidence.evidence_refs.clone(),
        deadline,
        room_evidence: None,
        room_probe: None,
        conversation_context: None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::config::{Config, DefaultMode};
    use crate::executor::scripted::{ScriptedExecutor, Step};

    fn services(executor: Arc<ScriptedExecutor>) -> RunService {
        let config = Config::from_lookup(DefaultMode::Development, &|name| match name {
            "HELIX_AGENT_OAUTH_JWKS_URL" => Some("http://127.0.0.1:9/jwks.json".into()),
            _ => None,
        })
        .expect("development defaults");
        crate::service::Services::new(config, Arc::new(crate::store::NoStore), executor).runs.clone()
    }

    fn request(run_id: &str) -> TurnRequest {
        TurnRequest {
            schema: TURN_REQUEST_SCHEMA.into(),
            mode: crate::executor::TurnMode::Read,
            run_id: run_id.into(),
            step: 1,
            claim_token: "claim".into(),
            objective: "o".into(),
            constraints: vec![],
            instruction: None,
            answers: vec![],
            capabilities: vec![],
            required_evidence_families: vec![],
            prior_evidence_refs: vec![],
            deadline: Utc::now(),
            room_evidence: None,
            room_probe: None,
            conversation_context: None,
        }
    }

    fn slow() -> Step {
        Step::Delay(Duration::from_secs(30), Box::new(Step::Fail(TurnFailure::ExecutorUnavailable)))
    }

    #[tokio::test]
    async fn a_cancelled_turn_fails_as_turn_cancelled_not_turn_timeout() {
        let s = services(Arc::new(ScriptedExecutor::new(vec![slow()], None)));
        let turn = tokio::spawn({
            let s = s.clone();
            async move { s.execute_turn(request("run_cancelled01"), Duration::from_secs(20)).await }
        });
        while !s.running.lock().unwrap().contains_key("run_cancelled01") {
            tokio::task::yield_now().await;
        }
        s.signal_cancelled("run_cancelled01");
        assert_eq!(turn.await.unwrap(), Err(TurnFailure::TurnCancelled));
        assert!(s.running.lock().unwrap().is_empty(), "the signal is unregistered");
    }

    #[tokio::test]
    async fn a_turn_past_its_budget_fails_as_turn_timeout() {
        let s = services(Arc::new(ScriptedExecutor::new(vec![slow()], None)));
        let failure = s.execute_turn(request("run_timeout0001"), Duration::from_millis(50)).await;
        assert_eq!(failure, Err(TurnFailure::TurnTimeout));
    }
}
