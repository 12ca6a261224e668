//! The live steps: the retained room, a fresh run bound to it, the replays, the reads,
//! withdrawal and rebind, then cleanup inside the reserved window. A step that fails
//! stops the automated phase; cleanup runs whenever anything was sent.

use std::time::Instant;

use serde_json::{Value, json};

use super::config::Config;
use super::http::{Http, Reply, Req};
use super::plan::{Kind, Learnt, Status, StepResult, key_ref};

const RUN_OBJECTIVE: &str = "Shared Live Room live acceptance: a bounded run bound to the retained acceptance room. \
                             The harness withdraws the binding and cancels the run; no turn is taken.";
const CANCEL_REASON: &str = "Shared Live Room live acceptance cleanup.";

/// The automated phase stopped (the step that stopped it is already recorded).
struct Stop;
type Step = Result<(), Stop>;

pub struct Runner<'a> {
    c: &'a Config,
    http: Http,
    main_deadline: Instant,
    end: Instant,
    pub steps: Vec<StepResult>,
    pub learnt: Learnt,
    run_key: String,
    /// A start was sent and no answer says whether it made a run.
    start_unknown: bool,
    /// A bind was sent and no answer says whether it made a binding.
    bind_unknown: bool,
    /// The binding this invocation made and has not withdrawn.
    active: Option<String>,
    version: Option<u64>,
}

/// The retained room's description: it names the room key by hash, so a later
/// invocation finds the same room after the key's receipt has expired.
pub fn room_marker(room_key: &str) -> String {
    format!(
        "Helix Shared Live Room live acceptance room (key ref {}). Retained: the facade has no room-close operation.",
        key_ref(room_key)
    )
}

/// No answer says whether a mutation took effect: none came, or only a transient one.
fn unanswered(reply: &Reply) -> bool {
    matches!(reply, Reply::Deadline) || reply.transient() || reply.error_code() == Some("outcome_unknown")
}

fn str_at<'v>(v: &'v Value, field: &str) -> Option<&'v str> {
    v.get(field).and_then(Value::as_str)
}

/// The four false authority/content flags every run, bundle and receipt carries.
fn false_flags(v: &Value) -> bool {
    ["answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"]
        .iter()
        .all(|f| v.get(*f) == Some(&Value::Bool(false)))
}

impl<'a> Runner<'a> {
    pub fn new(c: &'a Config, http: Http) -> Self {
        let now = Instant::now();
        let end = now + c.total_timeout;
        let run_key = format!("helix-acceptance-run-{}", helix_core::domain::random_hex(12));
        Self {
            c,
            http,
            main_deadline: end - c.cleanup_reserve,
            end,
            steps: Vec::new(),
            learnt: Learnt { run_key: Some(run_key.clone()), ..Learnt::default() },
            run_key,
            start_unknown: false,
            bind_unknown: false,
            active: None,
            version: None,
        }
    }

    /// Records `result`; a step that did not pass stops the automated phase.
    fn record(&mut self, result: StepResult) -> Step {
        let ok = matches!(result.status, Status::Passed | Status::Skipped);
        self.steps.push(result);
        if ok { Ok(()) } else { Err(Stop) }
    }

    /// A step's verdict from its reply: `check` names what is wrong with an answer.
    fn judge(
        &mut self,
        id: &'static str,
        reply: &Reply,
        attempts: u32,
        check: impl FnOnce(&Reply) -> Option<String>,
    ) -> Step {
        let mut r = StepResult::new(id, Status::Passed);
        r.attempts = attempts;
        r.http_status = reply.status();
        r.error_code = reply.error_code().map(str::to_owned);
        match reply {
            Reply::Deadline => r.status = Status::TimedOut,
            Reply::Answer { .. } if reply.error_code() == Some("outcome_unknown") => r.status = Status::OutcomeUnknown,
            _ => {
                if let Some(why) = check(reply) {
                    r.status = Status::Failed;
                    r.detail = Some(why);
                }
            }
        }
        if r.status != Status::Passed && r.detail.is_none() {
            r.detail = Some(reply.describe());
        }
        self.record(r)
    }

    pub async fn run(&mut self) {
        let _ = self.automated().await;
        // Every automated step is in the report, those never reached too.
        let why = if self.c.allow_mutation { "not_reached" } else { "mutation_not_permitted" };
        for s in super::plan::STEPS.iter().filter(|s| s.kind != Kind::Cleanup) {
            if !self.steps.iter().any(|r| r.id == s.id) {
                self.steps.push(StepResult::skipped(s.id, why));
            }
        }
        if self.c.allow_mutation {
            self.cleanup().await;
        } else {
            for id in ["cleanup_recover", "cleanup_unbind", "cleanup_cancel", "cleanup_verify"] {
                self.steps.push(StepResult::skipped(id, "nothing_created"));
            }
        }
    }

    async fn automated(&mut self) -> Step {
        let found = self.room_lookup().await?;
        if !self.c.allow_mutation {
            return if found { self.room_inspect().await } else { Ok(()) };
        }
        if found {
            self.record(StepResult::skipped("room_create", "retained_room_found"))?;
        } else {
            self.room_create().await?;
        }
        self.room_inspect().await?;
        self.run_start().await?;
        self.run_start_replay().await?;
        self.run_bind("run_bind").await?;
        self.run_bind_replay().await?;
        self.room_command_disabled().await?;
        self.run_reads().await?;
        self.run_unbind().await?;
        self.run_bind("run_rebind").await
    }

    async fn room_lookup(&mut self) -> Result<bool, Stop> {
        let marker = room_marker(&self.c.room_key);
        let mut path = "/api/v1/rooms".to_owned();
        for _ in 0..20 {
            let reply = self.http.send(&Req::get(&path), self.main_deadline).await;
            let body = reply.body().clone();
            let wrong = match reply.status() {
                Some(200) if str_at(&body, "schema") == Some("helix.room_list.v1") => None,
                _ => Some(reply.describe()),
            };
            if wrong.is_some() {
                return self.judge("room_lookup", &reply, 1, |_| wrong).map(|_| false);
            }
            let rooms = body.get("rooms").and_then(Value::as_array).cloned().unwrap_or_default();
            if let Some(room) = rooms.iter().find(|r| {
                r.get("owned_by_caller") == Some(&Value::Bool(true)) && str_at(r, "description") == Some(&marker)
            }) {
                self.learnt.room_id = str_at(room, "room_id").map(str::to_owned);
                self.learnt.room_reused = Some(true);
                self.record(StepResult::new("room_lookup", Status::Passed).with_detail("retained room found"))?;
                return Ok(true);
            }
            match str_at(&body, "next_cursor") {
                Some(cursor) if !cursor.is_empty() => path = format!("/api/v1/rooms?cursor={cursor}"),
                _ => break,
            }
        }
        self.record(StepResult::new("room_lookup", Status::Passed).with_detail("no retained room yet"))?;
        Ok(false)
    }

    async fn room_create(&mut self) -> Step {
        let body = json!({ "name": "Helix live acceptance", "description": room_marker(&self.c.room_key) });
        let req = Req::post("/api/v1/rooms", Some(&self.c.room_key), body);
        let (reply, attempts) = self.http.send_retrying_once(&req, self.main_deadline).await;
        if let Reply::Answer { status: 200 | 201, replayed, body } = &reply {
            self.learnt.room_id = str_at(body, "room_id").map(str::to_owned);
            self.learnt.room_reused = Some(*replayed == Some(true));
        }
        let has_room = self.learnt.room_id.is_some();
        self.judge("room_create", &reply, attempts, |r| match r.status() {
            Some(200 | 201) if has_room => None,
            _ => Some(r.describe()),
        })
    }

    async fn room_inspect(&mut self) -> Step {
        let room = self.learnt.room_id.clone().unwrap_or_default();
        let reply = self.http.send(&Req::get(format!("/api/v1/rooms/{room}")), self.main_deadline).await;
        self.judge("room_inspect", &reply, 1, |r| {
            let b = r.body();
            let ok = r.status() == Some(200)
                && str_at(b, "room_id") == Some(&room)
                && b.get("owned_by_caller") == Some(&Value::Bool(true))
                && b.get("execution_enabled") == Some(&Value::Bool(false));
            (!ok).then(|| format!("{}: not the owned room with execution_enabled false", r.describe()))
        })
    }

    fn start_req(&self) -> Req {
        let body = json!({
            "objective": RUN_OBJECTIVE,
            "database_scope": ["bound_room_evidence"],
            "budget": { "max_steps": 1, "expires_in_seconds": 3600 },
        });
        Req::post("/api/v1/agent-runs", Some(&self.run_key), body)
    }

    /// Sends the start (or its exact replay) and learns the run id, also from an
    /// `outcome_unknown` refusal's `details.run_id`.
    async fn send_start(&mut self) -> (Reply, u32) {
        let (reply, attempts) = self.http.send_retrying_once(&self.start_req(), self.main_deadline).await;
        let id = str_at(reply.body(), "run_id")
            .or_else(|| reply.body().pointer("/error/details/run_id").and_then(Value::as_str));
        if self.learnt.run_id.is_none() && reply.status().is_some_and(|s| s == 201 || s == 409) {
            self.learnt.run_id = id.map(str::to_owned);
        }
        self.start_unknown = self.learnt.run_id.is_none() && unanswered(&reply);
        (reply, attempts)
    }

    async fn run_start(&mut self) -> Step {
        let (reply, attempts) = self.send_start().await;
        let result_id = self.learnt.run_id.clone();
        let lost_and_recovered = attempts == 2 && matches!(reply, Reply::Answer { replayed: Some(true), .. });
        let step = self.judge("run_start", &reply, attempts, |r| {
            let b = r.body();
            let ok = r.status() == Some(201)
                && result_id.as_deref().is_some_and(|id| id.starts_with("run_"))
                && b.get("version") == Some(&json!(1))
                && str_at(b, "lifecycle_status") == Some("waiting")
                && false_flags(b);
            (!ok).then(|| format!("{}: not a fresh waiting run at version 1", r.describe()))
        });
        if lost_and_recovered && let Some(last) = self.steps.last_mut() {
            last.recovered_by_replay = true;
        }
        if step.is_err() && attempts == 2 && reply.transient() {
            // Both sends went unanswered: the run may exist. Cleanup replays the key.
            if let Some(last) = self.steps.last_mut() {
                last.status = Status::OutcomeUnknown;
            }
        }
        step
    }

    async fn run_start_replay(&mut self) -> Step {
        let reply = self.http.send(&self.start_req(), self.main_deadline).await;
        let run = self.learnt.run_id.clone();
        self.judge("run_start_replay", &reply, 1, |r| match r {
            Reply::Answer { status: 201, replayed: Some(true), body } if str_at(body, "run_id") == run.as_deref() => {
                None
            }
            _ => Some(format!("{}: not a replay of the same run", r.describe())),
        })
    }

    fn bind_req(&self) -> Req {
        let body = json!({ "room_id": self.learnt.room_id, "run_id": self.learnt.run_id });
        Req::post("/api/v1/rooms/run-bindings", None, body)
    }

    /// A bind (`run_bind`) or a fresh bind after withdrawal (`run_rebind`); a lost
    /// response is recovered by the exact bind, which answers the existing binding.
    async fn run_bind(&mut self, id: &'static str) -> Step {
        let (reply, attempts) = self.http.send_retrying_once(&self.bind_req(), self.main_deadline).await;
        self.bind_unknown = unanswered(&reply);
        let bref = str_at(reply.body(), "binding_ref").map(str::to_owned);
        let fresh = bref.as_ref().is_some_and(|b| b.starts_with("rrb_") && !self.learnt.binding_refs.contains(b));
        if let (Some(200 | 201), Some(b)) = (reply.status(), &bref) {
            self.active = Some(b.clone());
            if !self.learnt.binding_refs.contains(b) {
                self.learnt.binding_refs.push(b.clone());
            }
        }
        let step = self.judge(id, &reply, attempts, |r| {
            let ok = (r.status() == Some(201) || (attempts == 2 && r.status() == Some(200)))
                && fresh
                && str_at(r.body(), "binding_status") == Some("active");
            (!ok).then(|| format!("{}: not a new active binding", r.describe()))
        });
        if attempts == 2
            && step.is_ok()
            && let Some(last) = self.steps.last_mut()
        {
            last.recovered_by_replay = true;
        }
        step
    }

    async fn run_bind_replay(&mut self) -> Step {
        let reply = self.http.send(&self.bind_req(), self.main_deadline).await;
        let active = self.active.clone();
        self.judge("run_bind_replay", &reply, 1, |r| {
            let ok = r.status() == Some(200) && str_at(r.body(), "binding_ref") == active.as_deref();
            (!ok).then(|| format!("{}: not the existing binding", r.describe()))
        })
    }

    async fn room_command_disabled(&mut self) -> Step {
        let room = self.learnt.room_id.clone().unwrap_or_default();
        let req = Req::post(format!("/api/v1/rooms/{room}/commands"), None, json!({ "command": "acceptance.noop" }));
        let reply = self.http.send(&req, self.main_deadline).await;
        self.judge("room_command_disabled", &reply, 1, |r| {
            let ok = r.status() == Some(403) && r.error_code() == Some("command_execution_not_enabled");
            (!ok).then(|| format!("{}: expected 403 command_execution_not_enabled", r.describe()))
        })
    }

    async fn run_reads(&mut self) -> Step {
        let run = self.learnt.run_id.clone().unwrap_or_default();
        let reply = self.http.send(&Req::get(format!("/api/v1/agent-runs/{run}")), self.main_deadline).await;
        self.version = reply.body().get("version").and_then(Value::as_u64);
        self.judge("run_inspect", &reply, 1, |r| {
            let b = r.body();
            let ok = r.status() == Some(200)
                && str_at(b, "run_id") == Some(&run)
                && str_at(b, "lifecycle_status") == Some("waiting")
                && false_flags(b);
            (!ok).then(|| format!("{}: not the waiting run with the false flags", r.describe()))
        })?;
        let reply = self.http.send(&Req::get(format!("/api/v1/agent-runs/{run}/evidence")), self.main_deadline).await;
        self.judge("run_evidence", &reply, 1, |r| {
            let b = r.body();
            let ok = r.status() == Some(200)
                && str_at(b, "schema") == Some("helix.agent_run.evidence_bundle.v1")
                && false_flags(b);
            (!ok).then(|| format!("{}: not an evidence bundle with the false flags", r.describe()))
        })?;
        let path = format!("/api/v1/agent-runs/{run}/events?after_seq=0&limit=50");
        let reply = self.http.send(&Req::get(path), self.main_deadline).await;
        self.judge("run_events", &reply, 1, |r| {
            let seqs: Vec<u64> = r
                .body()
                .get("events")
                .and_then(Value::as_array)
                .map(|e| e.iter().filter_map(|e| e.get("seq").and_then(Value::as_u64)).collect())
                .unwrap_or_default();
            let ok = r.status() == Some(200) && !seqs.is_empty() && seqs.windows(2).all(|w| w[0] < w[1]);
            (!ok).then(|| format!("{}: no ordered events", r.describe()))
        })
    }

    /// Withdraws `bref` (retried once); `expect` is the revocation status it must report.
    async fn withdraw(&mut self, id: &'static str, bref: &str, deadline: Instant, expect: &[&str]) -> Step {
        let req = Req::delete(format!("/api/v1/rooms/run-bindings/{bref}"));
        let (reply, attempts) = self.http.send_retrying_once(&req, deadline).await;
        let done = reply.status() == Some(200)
            && str_at(reply.body(), "binding_status") == Some("revoked")
            && str_at(reply.body(), "revocation_status").is_some_and(|s| expect.contains(&s));
        if done && self.active.as_deref() == Some(bref) {
            self.active = None;
        }
        self.judge(id, &reply, attempts, |r| {
            (!done).then(|| format!("{}: expected {}", r.describe(), expect.join(" or ")))
        })
    }

    async fn run_unbind(&mut self) -> Step {
        let bref = self.active.clone().unwrap_or_default();
        self.withdraw("run_unbind", &bref, self.main_deadline, &["revoked"]).await?;
        self.withdraw("run_unbind_replay", &bref, self.main_deadline, &["already_revoked"]).await
    }

    /// Cleanup, in the reserved window: recover lost ids, withdraw, cancel, verify. Every
    /// step runs whatever happened before it; one that does not pass is a release failure.
    async fn cleanup(&mut self) {
        let end = self.end;
        let (lost_run, lost_bind) = (self.start_unknown, self.bind_unknown);
        if lost_run || lost_bind {
            if lost_run {
                self.main_deadline = end;
                let (reply, attempts) = self.send_start().await;
                let found = self.learnt.run_id.is_some();
                let _ = self.judge("cleanup_recover", &reply, attempts, |r| (!found).then(|| r.describe()));
            }
            if lost_bind && self.learnt.run_id.is_some() && self.learnt.room_id.is_some() {
                let (reply, attempts) = self.http.send_retrying_once(&self.bind_req(), end).await;
                self.bind_unknown = unanswered(&reply);
                if let (Some(200 | 201), Some(b)) = (reply.status(), str_at(reply.body(), "binding_ref")) {
                    self.active = Some(b.to_owned());
                    self.learnt.binding_refs.push(b.to_owned());
                }
                let found = self.active.is_some();
                let _ = self.judge("cleanup_recover", &reply, attempts, |r| (!found).then(|| r.describe()));
            }
        } else {
            self.steps.push(StepResult::skipped("cleanup_recover", "not_needed"));
        }
        match self.active.clone() {
            Some(bref) => {
                let _ = self.withdraw("cleanup_unbind", &bref, end, &["revoked", "already_revoked"]).await;
            }
            None => self.steps.push(StepResult::skipped("cleanup_unbind", "no_active_binding")),
        }
        let Some(run) = self.learnt.run_id.clone() else {
            let why = if self.start_unknown { "run_unknown" } else { "no_run" };
            if self.start_unknown {
                self.steps.push(StepResult::new("cleanup_cancel", Status::Failed).with_detail(why));
            } else {
                self.steps.push(StepResult::skipped("cleanup_cancel", why));
            }
            self.steps.push(StepResult::skipped("cleanup_verify", why));
            return;
        };
        let _ = self.cancel(&run).await;
        let reply = self.http.send(&Req::get(format!("/api/v1/agent-runs/{run}")), end).await;
        let cancelled = reply.status() == Some(200) && str_at(reply.body(), "lifecycle_status") == Some("cancelled");
        let last = self.learnt.binding_refs.last().cloned();
        let revoked = match &last {
            Some(b) => {
                let r = self.http.send(&Req::delete(format!("/api/v1/rooms/run-bindings/{b}")), end).await;
                str_at(r.body(), "revocation_status") == Some("already_revoked")
            }
            None => true,
        };
        let _ = self.judge("cleanup_verify", &reply, 1, |r| match (cancelled, revoked) {
            (true, true) => None,
            (false, _) => Some(format!("{}: the run is not cancelled", r.describe())),
            (true, false) => Some("the last binding is not revoked".into()),
        });
    }

    /// Cancels at the current version (read first); retried once on a transient reply
    /// with the same key, or once with a second key after a version conflict.
    async fn cancel(&mut self, run: &str) -> Step {
        let end = self.end;
        let current = self.http.send(&Req::get(format!("/api/v1/agent-runs/{run}")), end).await;
        if let Some(v) = current.body().get("version").and_then(Value::as_u64) {
            self.version = Some(v);
        }
        let path = format!("/api/v1/agent-runs/{run}/cancel");
        let body = |v: Option<u64>| json!({ "expected_version": v.unwrap_or(1), "reason": CANCEL_REASON });
        let key = format!("{}-cancel", self.run_key);
        let (mut reply, mut attempts) =
            self.http.send_retrying_once(&Req::post(&path, Some(&key), body(self.version)), end).await;
        if attempts == 1 && reply.error_code() == Some("version_conflict") {
            let v = reply.body().pointer("/error/details/current_version").and_then(Value::as_u64);
            let key = format!("{}-cancel-2", self.run_key);
            reply = self.http.send(&Req::post(&path, Some(&key), body(v)), end).await;
            attempts = 2;
        }
        let already = reply.error_code() == Some("run_not_continuable")
            && str_at(current.body(), "lifecycle_status") == Some("cancelled");
        self.judge("cleanup_cancel", &reply, attempts, |r| {
            let ok = already || (r.status() == Some(200) && str_at(r.body(), "lifecycle_status") == Some("cancelled"));
            (!ok).then(|| format!("{}: the run was not cancelled", r.describe()))
        })
    }
}
