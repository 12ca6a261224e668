//! The typed plan and report `helix.shared_room.live_acceptance.v1`: the automated steps
//! (in order), the checkpoints only a person with a signed-in browser or a real producer
//! can do, the outcome and its exit code, and the last redaction every output crosses.

use serde_json::{Value, json};

use super::config::{Config, ConfigError};

pub const SCHEMA: &str = "helix.shared_room.live_acceptance.v1";

/// What a step may do: read, mutate (only with the mutation opt-in), or clean up what
/// this invocation created (always attempted once anything was sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Mutation,
    Cleanup,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Mutation => "mutation",
            Kind::Cleanup => "cleanup",
        }
    }
}

pub struct StepSpec {
    pub id: &'static str,
    pub kind: Kind,
    pub method: &'static str,
    pub path: &'static str,
    pub checks: &'static str,
}

const fn step(
    id: &'static str,
    kind: Kind,
    method: &'static str,
    path: &'static str,
    checks: &'static str,
) -> StepSpec {
    StepSpec { id, kind, method, path, checks }
}

/// Every automated step, in the order a live invocation takes them.
pub const STEPS: &[StepSpec] = &[
    step(
        "room_lookup",
        Kind::Read,
        "GET",
        "/api/v1/rooms",
        "finds the retained acceptance room of the room key, if any",
    ),
    step(
        "room_create",
        Kind::Mutation,
        "POST",
        "/api/v1/rooms",
        "creates the room with the caller-stable room key (a replay returns the same room); skipped when the lookup found it",
    ),
    step(
        "room_inspect",
        Kind::Read,
        "GET",
        "/api/v1/rooms/{room_id}",
        "the exact room, owned by the caller, execution_enabled false",
    ),
    step(
        "run_start",
        Kind::Mutation,
        "POST",
        "/api/v1/agent-runs",
        "a bound_room_evidence run under a fresh run key; a lost response is recovered by replaying that exact key",
    ),
    step(
        "run_start_replay",
        Kind::Mutation,
        "POST",
        "/api/v1/agent-runs",
        "the exact key again: the same run_id with Idempotency-Replayed: true",
    ),
    step(
        "run_bind",
        Kind::Mutation,
        "POST",
        "/api/v1/rooms/run-bindings",
        "binds the run to the room; a lost response is recovered by the exact (idempotent) bind",
    ),
    step(
        "run_bind_replay",
        Kind::Mutation,
        "POST",
        "/api/v1/rooms/run-bindings",
        "the exact bind again: 200 and the same binding_ref",
    ),
    step(
        "room_command_disabled",
        Kind::Mutation,
        "POST",
        "/api/v1/rooms/{room_id}/commands",
        "403 command_execution_not_enabled; nothing is executed",
    ),
    step(
        "run_inspect",
        Kind::Read,
        "GET",
        "/api/v1/agent-runs/{run_id}",
        "the run is waiting, with the four false authority flags",
    ),
    step(
        "run_evidence",
        Kind::Read,
        "GET",
        "/api/v1/agent-runs/{run_id}/evidence",
        "a helix.agent_run.evidence_bundle.v1 with the false flags",
    ),
    step(
        "run_events",
        Kind::Read,
        "GET",
        "/api/v1/agent-runs/{run_id}/events?after_seq=0&limit=50",
        "ordered events with increasing seq",
    ),
    step(
        "run_unbind",
        Kind::Mutation,
        "DELETE",
        "/api/v1/rooms/run-bindings/{binding_ref}",
        "withdraws the binding: revoked (retried once on a transient failure)",
    ),
    step(
        "run_unbind_replay",
        Kind::Mutation,
        "DELETE",
        "/api/v1/rooms/run-bindings/{binding_ref}",
        "withdrawing again: already_revoked",
    ),
    step(
        "run_rebind",
        Kind::Mutation,
        "POST",
        "/api/v1/rooms/run-bindings",
        "a fresh bind after withdrawal: a new binding_ref",
    ),
    step(
        "cleanup_recover",
        Kind::Cleanup,
        "POST",
        "/api/v1/agent-runs | /api/v1/rooms/run-bindings",
        "only after a lost mutation response: replays the exact start key or the exact bind to recover the id",
    ),
    step(
        "cleanup_unbind",
        Kind::Cleanup,
        "DELETE",
        "/api/v1/rooms/run-bindings/{binding_ref}",
        "withdraws the active binding (retried once)",
    ),
    step(
        "cleanup_cancel",
        Kind::Cleanup,
        "POST",
        "/api/v1/agent-runs/{run_id}/cancel",
        "cancels the run at its current version (retried once)",
    ),
    step(
        "cleanup_verify",
        Kind::Cleanup,
        "GET",
        "/api/v1/agent-runs/{run_id}",
        "the run is cancelled and the last binding answers already_revoked",
    ),
];

pub fn spec(id: &str) -> &'static StepSpec {
    STEPS.iter().find(|s| s.id == id).expect("a step of the catalog")
}

/// What the harness cannot do and a person must: each stays `pending_manual`.
pub const CHECKPOINTS: &[(&str, &str, &str)] = &[
    ("browser_sign_in", "browser", "Sign in as the same linked, non-guest account in a same-origin browser."),
    (
        "room_consent",
        "browser",
        "Accept the room's current consent version on the /rooms page (and for each invited member).",
    ),
    (
        "chat_select_and_claim",
        "browser",
        "Select the chat and issue the one-time chat claim; the agent consumes it for the run (the harness never sees it).",
    ),
    (
        "source_credential_claim",
        "browser",
        "Issue and claim the room-source credential delivery as the developer owner; that browser alone shows the source credential, once.",
    ),
    (
        "observer_disconnect_rebind",
        "browser",
        "Disconnect and rebind the observer, and poll the observer lane with after_seq.",
    ),
    (
        "terminal_append_once",
        "browser",
        "Verify exactly one canonical terminal assistant message is appended to the bound chat (one observer tab).",
    ),
    (
        "producer_fresh_evidence",
        "producer",
        "A real Minecraft producer submits fresh exact-provenance evidence for the bound room.",
    ),
    (
        "keyed_ask_equivalence",
        "interactive",
        "Representative keyed Ask, Realtime, text and voice equivalence (companion interactive checkpoint).",
    ),
];

/// Never accepted, scraped or printed by the harness.
pub const NEVER_HANDLED: &[&str] = &["browser_cookie", "chat_claim_handle", "source_bearer"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Planned,
    Passed,
    Failed,
    Skipped,
    TimedOut,
    OutcomeUnknown,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Planned => "planned",
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::TimedOut => "timed_out",
            Status::OutcomeUnknown => "outcome_unknown",
        }
    }
}

/// One step's result.
#[derive(Debug, Clone)]
pub struct StepResult {
    pub id: &'static str,
    pub status: Status,
    pub attempts: u32,
    pub http_status: Option<u16>,
    pub error_code: Option<String>,
    pub detail: Option<String>,
    pub recovered_by_replay: bool,
}

impl StepResult {
    pub fn new(id: &'static str, status: Status) -> Self {
        Self { id, status, attempts: 0, http_status: None, error_code: None, detail: None, recovered_by_replay: false }
    }
    pub fn skipped(id: &'static str, reason: &str) -> Self {
        Self { detail: Some(reason.to_owned()), ..Self::new(id, Status::Skipped) }
    }
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    fn to_json(&self) -> Value {
        let s = spec(self.id);
        let mut v = json!({
            "id": s.id, "kind": s.kind.name(), "method": s.method, "path": s.path, "checks": s.checks,
            "status": self.status.name(),
        });
        let o = v.as_object_mut().expect("object");
        if self.attempts > 0 {
            o.insert("attempts".into(), json!(self.attempts));
        }
        if let Some(h) = self.http_status {
            o.insert("http_status".into(), json!(h));
        }
        if let Some(c) = &self.error_code {
            o.insert("error_code".into(), json!(c));
        }
        if let Some(d) = &self.detail {
            o.insert("detail".into(), json!(d));
        }
        if self.recovered_by_replay {
            o.insert("recovered_by_replay".into(), json!(true));
        }
        v
    }
}

/// The outcome, from worst to best; the exit code follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    ConfigError,
    ReleaseFailure,
    Failed,
    /// Automated steps passed (or were planned / not permitted); manual checkpoints remain.
    Partial,
    Planned,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::ConfigError => "config_error",
            Outcome::ReleaseFailure => "release_failure",
            Outcome::Failed => "failed",
            Outcome::Partial => "partial",
            Outcome::Planned => "planned",
        }
    }

    /// 0 ok (a plan, or a partial pass without REQUIRE_COMPLETE); 1 an automated check
    /// failed; 2 configuration refused (nothing was sent); 3 incomplete under
    /// REQUIRE_COMPLETE; 4 release failure (cleanup failed or an outcome is unknown).
    pub fn exit_code(self, require_complete: bool) -> u8 {
        match self {
            Outcome::ConfigError => 2,
            Outcome::ReleaseFailure => 4,
            Outcome::Failed => 1,
            Outcome::Partial | Outcome::Planned if require_complete => 3,
            Outcome::Partial | Outcome::Planned => 0,
        }
    }
}

/// The outcome of a live invocation's steps: a cleanup step that did not pass, or any
/// unknown outcome, is a release failure; any other failure fails the check.
pub fn outcome_of(steps: &[StepResult]) -> Outcome {
    let bad = |s: &StepResult| matches!(s.status, Status::Failed | Status::TimedOut | Status::OutcomeUnknown);
    if steps.iter().any(|s| s.status == Status::OutcomeUnknown || (spec(s.id).kind == Kind::Cleanup && bad(s))) {
        Outcome::ReleaseFailure
    } else if steps.iter().any(bad) {
        Outcome::Failed
    } else {
        Outcome::Partial
    }
}

/// The dry run: every step as it would be taken under this configuration.
pub fn planned_steps(c: &Config) -> Vec<StepResult> {
    STEPS
        .iter()
        .map(|s| match s.kind {
            Kind::Mutation | Kind::Cleanup if !c.allow_mutation => StepResult::skipped(s.id, "mutation_not_permitted"),
            _ => StepResult::new(s.id, Status::Planned),
        })
        .collect()
}

/// Ids and facts a live run learnt (all opaque server identifiers or harness-made keys).
#[derive(Debug, Default, Clone)]
pub struct Learnt {
    pub room_id: Option<String>,
    pub room_reused: Option<bool>,
    pub run_key: Option<String>,
    pub run_id: Option<String>,
    pub binding_refs: Vec<String>,
    pub elapsed_ms: Option<u128>,
}

pub fn report(c: &Config, mode: &str, steps: &[StepResult], learnt: &Learnt, outcome: Outcome) -> Value {
    let exit = outcome.exit_code(c.require_complete);
    json!({
        "schema": SCHEMA,
        "mode": mode,
        "outcome": outcome.name(),
        "complete": false,
        "release_failure": outcome == Outcome::ReleaseFailure,
        "exit_code": exit,
        "target": { "base_url": c.base_url.as_str().trim_end_matches('/'), "plain_loopback_http": c.loopback_http },
        "opt_ins": {
            "network": c.network,
            "allow_loopback_http": c.allow_loopback_http,
            "allow_mutation": c.allow_mutation,
            "require_complete": c.require_complete,
            "access_token": if c.access_token.is_some() { "[redacted]" } else { "not_configured" },
        },
        "budget": {
            "request_timeout_ms": c.request_timeout.as_millis(),
            "total_timeout_ms": c.total_timeout.as_millis(),
            "cleanup_reserve_ms": c.cleanup_reserve.as_millis(),
            "elapsed_ms": learnt.elapsed_ms,
        },
        "room": {
            "idempotency_key_source": if c.room_key_from_env { "environment" } else { "default" },
            "idempotency_key_ref": key_ref(&c.room_key),
            "room_id": learnt.room_id,
            "reused": learnt.room_reused,
            "retained": true,
        },
        "run": {
            "idempotency_key": learnt.run_key,
            "run_id": learnt.run_id,
            "binding_refs": learnt.binding_refs,
        },
        "steps": steps.iter().map(StepResult::to_json).collect::<Vec<_>>(),
        "manual_checkpoints": CHECKPOINTS.iter().map(|(id, surface, what)| json!({
            "id": id, "surface": surface, "status": "pending_manual", "description": what,
        })).collect::<Vec<_>>(),
        "never_handled": NEVER_HANDLED,
    })
}

/// A refused configuration: the errors (names and reasons only) and nothing else.
pub fn config_error_report(errors: &[ConfigError]) -> Value {
    json!({
        "schema": SCHEMA,
        "mode": "none",
        "outcome": Outcome::ConfigError.name(),
        "complete": false,
        "release_failure": false,
        "exit_code": Outcome::ConfigError.exit_code(false),
        "errors": errors.iter().map(ConfigError::to_json).collect::<Vec<_>>(),
        "never_handled": NEVER_HANDLED,
    })
}

/// The last boundary of every output: the configured token is cut out of every string
/// and key, then anything credential-shaped (a claim handle, a bearer) is redacted by the
/// room projection rule.
pub fn redact(value: Value, token: Option<&str>) -> Value {
    fn cut(v: Value, t: &str) -> Value {
        let s = |x: String| if x.contains(t) { x.replace(t, "[redacted]") } else { x };
        match v {
            Value::String(x) => Value::String(s(x)),
            Value::Array(a) => Value::Array(a.into_iter().map(|x| cut(x, t)).collect()),
            Value::Object(m) => Value::Object(m.into_iter().map(|(k, x)| (s(k), cut(x, t))).collect()),
            other => other,
        }
    }
    let value = match token {
        Some(t) if !t.is_empty() => cut(value, t),
        _ => value,
    };
    helix_core::domain::room::redact(value)
}

/// The first 16 hex digits of the key's SHA-256: names a key without showing it.
pub fn key_ref(key: &str) -> String {
    helix_core::domain::sha256_hex(key)[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_cut_from_values_and_keys_at_any_depth() {
        let t = "tok-abc.def";
        let v = json!({"a": [{"b": format!("x {t} y")}], t: 1, "c": "hcc_0123456789abcdef0123456789abcdef"});
        let out = serde_json::to_string(&redact(v, Some(t))).unwrap();
        assert!(!out.contains(t), "{out}");
        assert!(!out.contains("hcc_0123456789abcdef"), "a claim handle is redacted too: {out}");
    }

    #[test]
    fn outcomes_and_exit_codes() {
        let r = |id, st| StepResult::new(id, st);
        assert_eq!(outcome_of(&[r("run_start", Status::Passed)]), Outcome::Partial);
        assert_eq!(outcome_of(&[r("run_inspect", Status::Failed)]), Outcome::Failed);
        assert_eq!(
            outcome_of(&[r("run_inspect", Status::Failed), r("cleanup_cancel", Status::Failed)]),
            Outcome::ReleaseFailure
        );
        assert_eq!(outcome_of(&[r("run_start", Status::OutcomeUnknown)]), Outcome::ReleaseFailure);
        assert_eq!(outcome_of(&[r("cleanup_cancel", Status::Skipped)]), Outcome::Partial);
        assert_eq!(Outcome::Partial.exit_code(false), 0);
        assert_eq!(Outcome::Partial.exit_code(true), 3);
        assert_eq!(Outcome::Planned.exit_code(true), 3);
        assert_eq!(Outcome::Failed.exit_code(true), 1);
        assert_eq!(Outcome::ReleaseFailure.exit_code(false), 4);
        assert_eq!(Outcome::ConfigError.exit_code(false), 2);
    }
}
