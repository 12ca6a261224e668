//! The run: wire requests (strict), the stored record, its public projection, and
//! the status vocabulary. Transitions live in `turn` (continue) and here (cancel).

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::ids::RunId;
use super::sha256_hex;
use super::turn::SolverStatus;

pub const RUN_SCHEMA: &str = "helix.agent_run.v1";
pub const RUNTIME_PROVIDER: &str = "helix_ask";
pub const MAX_OBJECTIVE_CHARS: usize = 4000;
pub const MAX_CONSTRAINTS: usize = 32;
pub const MAX_CONSTRAINT_CHARS: usize = 1000;
pub const MAX_INSTRUCTION_CHARS: usize = 4000;
pub const MAX_ANSWERS: usize = 32;
pub const MAX_REASON_CHARS: usize = 1000;
pub const OUTPUT_FIELDS: &[&str] = &["text", "supporting_evidence_refs"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    Queued,
    Running,
    Waiting,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    Pending,
    Completed,
    NeedsMoreEvidence,
    NeedsInput,
    ConflictDetected,
    Blocked,
    Failed,
    BudgetExhausted,
    Cancelled,
}

impl Completion {
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::BudgetExhausted | Self::Cancelled)
    }

    /// The wire name (the serde name), for error details.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Completed => "completed",
            Self::NeedsMoreEvidence => "needs_more_evidence",
            Self::NeedsInput => "needs_input",
            Self::ConflictDetected => "conflict_detected",
            Self::Blocked => "blocked",
            Self::Failed => "failed",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// No turn has been evaluated yet.
    NotEvaluated,
    /// The contract does not require terminal authority.
    NotRequired,
    /// Evaluated: no terminal candidate was offered this turn.
    Missing,
    /// Evaluated: a candidate failed verification.
    Rejected,
    /// Evaluated: a hard gate (scope-required evidence) blocks authority.
    Blocked,
    Authorized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NextAction {
    Continue,
    AnswerQuestions,
    /// A turn holds the run: poll it (only ever observed, never stored).
    Wait,
    Stop,
}

// ---------- wire requests ----------

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    pub objective: String,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    pub database_scope: Vec<String>,
    #[serde(default)]
    pub completion_contract: Option<ContractRequest>,
    #[serde(default)]
    pub budget: Option<BudgetRequest>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContractRequest {
    pub min_evidence_refs: Option<u32>,
    pub require_terminal_authority: Option<bool>,
    pub required_output_fields: Option<Vec<String>>,
    pub max_unresolved_requirements: Option<u32>,
    pub allow_conflicts: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    pub max_steps: Option<u32>,
    pub expires_in_seconds: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueRequest {
    pub expected_version: u64,
    #[serde(default)]
    pub instruction: Option<String>,
    #[serde(default)]
    pub answers: Vec<Answer>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub question_id: String,
    pub value: serde_json::Value,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    pub expected_version: u64,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A refused request field: which one and why (becomes `invalid_request`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Invalid {
    pub field: &'static str,
    pub problem: String,
}

fn invalid(field: &'static str, problem: impl Into<String>) -> Invalid {
    Invalid { field, problem: problem.into() }
}

// ---------- stored record ----------

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompletionContract {
    pub min_evidence_refs: u32,
    pub require_terminal_authority: bool,
    pub required_output_fields: Vec<String>,
    pub max_unresolved_requirements: u32,
    pub allow_conflicts: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub max_steps: u32,
    pub steps_used: u32,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requirement {
    pub id: String,
    #[schemars(with = "String")]
    pub kind: RequirementKind,
    pub detail: String,
}

/// What kind of requirement: the two the service owns (rebuilt by it on every turn,
/// never taken from a solver), or a solver's own kind (e.g. `capability`), kept as sent.
/// On the wire it is the plain string, as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RequirementKind {
    /// `required_evidence:<family>`: the hard gate of a logical scope.
    RequiredEvidence,
    /// `turn_failure:<code>`: the step ended without a solver artifact.
    TurnFailure,
    Solver(String),
}

impl RequirementKind {
    pub fn is_service_owned(&self) -> bool {
        !matches!(self, Self::Solver(_))
    }
}

impl From<String> for RequirementKind {
    fn from(s: String) -> Self {
        match s.as_str() {
            "required_evidence" => Self::RequiredEvidence,
            "turn_failure" => Self::TurnFailure,
            _ => Self::Solver(s),
        }
    }
}

impl From<RequirementKind> for String {
    fn from(k: RequirementKind) -> Self {
        match k {
            RequirementKind::RequiredEvidence => "required_evidence".into(),
            RequirementKind::TurnFailure => "turn_failure".into(),
            RequirementKind::Solver(s) => s,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Contradiction {
    pub id: String,
    pub claim: String,
    pub evidence_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Question {
    pub question_id: String,
    pub prompt: String,
}

/// One admitted piece of evidence (bundle detail; the run lists only refs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvidenceItem {
    #[serde(rename = "ref")]
    pub reference: String,
    pub family: String,
    pub source: String,
    pub content_sha256: String,
    pub excerpt: String,
    pub step: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvidenceRefs {
    pub observation_refs: Vec<String>,
    pub evidence_refs: Vec<String>,
    pub receipt_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TerminalProduct {
    pub text: String,
    pub text_sha256: String,
    pub supporting_evidence_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatestResult {
    pub step: u32,
    pub solver_status: SolverStatus,
    pub summary: String,
    pub terminal_product: Option<TerminalProduct>,
    pub failure_code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub token: String,
    pub lease_until: i64,
    pub key_ref: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ownership {
    pub owner_ref: String,
    pub tenant_ref: String,
    pub account_ref: String,
}

/// The durable run. `rev` changes on every write (claims included) and is the CAS
/// guard; `version` is the public counter, bumped only by accepted mutations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: String,
    pub owner_hash: String,
    pub ownership: Ownership,
    pub objective: String,
    pub constraints: Vec<String>,
    pub database_scope: Vec<String>,
    pub completion_contract: CompletionContract,
    pub budget: Budget,
    pub lifecycle_status: Lifecycle,
    pub completion_status: Completion,
    pub terminal_authority_status: Authority,
    pub version: u64,
    pub rev: u64,
    pub last_seq: u64,
    pub unresolved_requirements: Vec<Requirement>,
    pub contradictions: Vec<Contradiction>,
    pub pending_questions: Vec<Question>,
    pub evidence: EvidenceRefs,
    pub evidence_items: Vec<EvidenceItem>,
    pub supported_claims: Vec<String>,
    pub terminal_candidate_ref: Option<String>,
    pub latest_result: Option<LatestResult>,
    pub claim: Option<Claim>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub cancelled_at: Option<DateTime<Utc>>,
}

/// A validated start request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartSpec {
    pub objective: String,
    pub constraints: Vec<String>,
    pub database_scope: Vec<String>,
    pub contract: CompletionContract,
    pub max_steps: u32,
    pub expires_in_seconds: u64,
}

impl StartRequest {
    pub fn validate(self) -> Result<StartSpec, Invalid> {
        let objective = self.objective.trim().to_owned();
        if objective.is_empty() || objective.chars().count() > MAX_OBJECTIVE_CHARS {
            return Err(invalid("objective", format!("must be 1-{MAX_OBJECTIVE_CHARS} characters")));
        }
        if self.constraints.len() > MAX_CONSTRAINTS
            || self.constraints.iter().any(|c| c.trim().is_empty() || c.chars().count() > MAX_CONSTRAINT_CHARS)
        {
            return Err(invalid(
                "constraints",
                format!("at most {MAX_CONSTRAINTS} nonempty entries of {MAX_CONSTRAINT_CHARS} characters"),
            ));
        }
        let mut scopes = self.database_scope.clone();
        scopes.sort();
        scopes.dedup();
        if scopes.len() != self.database_scope.len() || scopes.len() > 7 {
            return Err(invalid("database_scope", "entries must be distinct (at most 7)"));
        }
        let c = self.completion_contract.unwrap_or(ContractRequest {
            min_evidence_refs: None,
            require_terminal_authority: None,
            required_output_fields: None,
            max_unresolved_requirements: None,
            allow_conflicts: None,
        });
        let fields = c.required_output_fields.unwrap_or_default();
        if let Some(bad) = fields.iter().find(|f| !OUTPUT_FIELDS.contains(&f.as_str())) {
            return Err(invalid(
                "completion_contract.required_output_fields",
                format!("unknown output field {bad:?}; known: {}", OUTPUT_FIELDS.join(", ")),
            ));
        }
        let contract = CompletionContract {
            min_evidence_refs: c.min_evidence_refs.unwrap_or(1),
            require_terminal_authority: c.require_terminal_authority.unwrap_or(true),
            required_output_fields: fields,
            max_unresolved_requirements: c.max_unresolved_requirements.unwrap_or(0),
            allow_conflicts: c.allow_conflicts.unwrap_or(false),
        };
        if contract.min_evidence_refs > 200 || contract.max_unresolved_requirements > 200 {
            return Err(invalid("completion_contract", "counts are 0-200"));
        }
        let b = self.budget.unwrap_or(BudgetRequest { max_steps: None, expires_in_seconds: None });
        let max_steps = b.max_steps.unwrap_or(12);
        if !(1..=64).contains(&max_steps) {
            return Err(invalid("budget.max_steps", "must be 1-64"));
        }
        let expires_in_seconds = b.expires_in_seconds.unwrap_or(3600);
        if !(60..=604_800).contains(&expires_in_seconds) {
            return Err(invalid("budget.expires_in_seconds", "must be 60-604800"));
        }
        Ok(StartSpec {
            objective,
            constraints: self.constraints,
            database_scope: self.database_scope,
            contract,
            max_steps,
            expires_in_seconds,
        })
    }
}

impl ContinueRequest {
    /// Shape checks that need no run; answer references are checked against the run.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.expected_version == 0 {
            return Err(invalid("expected_version", "must be a positive integer"));
        }
        let instruction = self.instruction.as_deref().map(str::trim).unwrap_or("");
        if instruction.is_empty() && self.answers.is_empty() {
            return Err(invalid("instruction", "a continuation needs a nonempty instruction, an answer, or both"));
        }
        if self.instruction.as_deref().is_some_and(|i| i.chars().count() > MAX_INSTRUCTION_CHARS) {
            return Err(invalid("instruction", format!("at most {MAX_INSTRUCTION_CHARS} characters")));
        }
        if self.answers.len() > MAX_ANSWERS {
            return Err(invalid("answers", format!("at most {MAX_ANSWERS}")));
        }
        if serde_json::to_string(&self.answers).map(|s| s.len()).unwrap_or(usize::MAX) > 16_384 {
            return Err(invalid("answers", "answer values are at most 16 KiB in all"));
        }
        Ok(())
    }

    /// Every answer names an outstanding question, each at most once.
    pub fn check_answers(&self, pending: &[Question]) -> Result<(), Invalid> {
        let mut seen: Vec<&str> = Vec::new();
        for a in &self.answers {
            if !pending.iter().any(|q| q.question_id == a.question_id) {
                return Err(invalid("answers", format!("{:?} is not an outstanding question", a.question_id)));
            }
            if seen.contains(&a.question_id.as_str()) {
                return Err(invalid("answers", format!("{:?} is answered twice", a.question_id)));
            }
            seen.push(&a.question_id);
        }
        Ok(())
    }
}

impl CancelRequest {
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.expected_version == 0 {
            return Err(invalid("expected_version", "must be a positive integer"));
        }
        if self.reason.as_deref().is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
            return Err(invalid("reason", format!("at most {MAX_REASON_CHARS} characters")));
        }
        Ok(())
    }
}

impl Run {
    pub fn new(
        id: &RunId,
        owner_hash: String,
        ownership: Ownership,
        spec: StartSpec,
        required_families: &[&str],
        now: DateTime<Utc>,
    ) -> Self {
        Run {
            run_id: id.to_string(),
            owner_hash,
            ownership,
            objective: spec.objective,
            constraints: spec.constraints,
            database_scope: spec.database_scope,
            completion_contract: spec.contract,
            budget: Budget {
                max_steps: spec.max_steps,
                steps_used: 0,
                expires_at: now + Duration::seconds(spec.expires_in_seconds as i64),
            },
            lifecycle_status: Lifecycle::Waiting,
            completion_status: Completion::NeedsMoreEvidence,
            terminal_authority_status: Authority::NotEvaluated,
            version: 1,
            rev: 1,
            last_seq: 0,
            unresolved_requirements: required_families.iter().map(|f| required_evidence(f)).collect(),
            contradictions: vec![],
            pending_questions: vec![],
            evidence: EvidenceRefs::default(),
            evidence_items: vec![],
            supported_claims: vec![],
            terminal_candidate_ref: None,
            latest_result: None,
            claim: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            cancelled_at: None,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.completion_status.is_terminal()
    }

    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        now >= self.budget.expires_at
    }

    /// A claim whose lease has not run out.
    pub fn live_claim(&self, now_epoch: i64) -> Option<&Claim> {
        self.claim.as_ref().filter(|c| c.lease_until > now_epoch)
    }

    pub fn next_action(&self) -> NextAction {
        match self.completion_status {
            c if c.is_terminal() => NextAction::Stop,
            Completion::NeedsInput => NextAction::AnswerQuestions,
            _ => NextAction::Continue,
        }
    }

    pub fn objective_hash(&self) -> String {
        format!("sha256:{}", sha256_hex(&self.objective))
    }

    /// Cancel: irreversible, bumps the version, clears any claim (so a running
    /// turn's finalization fails its compare-and-set).
    pub fn cancel(&mut self, now: DateTime<Utc>) {
        self.lifecycle_status = Lifecycle::Cancelled;
        self.completion_status = Completion::Cancelled;
        self.pending_questions.clear();
        self.claim = None;
        self.version += 1;
        self.updated_at = now;
        self.cancelled_at = Some(now);
    }

    /// Ends the run for step or time exhaustion.
    pub fn exhaust(&mut self, now: DateTime<Utc>) {
        self.lifecycle_status = Lifecycle::Failed;
        self.completion_status = Completion::BudgetExhausted;
        self.claim = None;
        self.version += 1;
        self.updated_at = now;
        self.completed_at = Some(now);
    }

    /// The public `helix.agent_run.v1` projection (see `wire::RunView`).
    pub fn to_public(&self) -> serde_json::Value {
        super::wire::to_value(&super::wire::RunView::of(self))
    }

    /// The projection as observed at `now_epoch` (see `wire::RunView::observed`),
    /// serialized once.
    pub fn observed_json(&self, now_epoch: i64) -> super::wire::RunJson {
        super::wire::RunJson::of(&super::wire::RunView::observed(self, now_epoch))
    }

    /// The `helix.agent_run.evidence_bundle.v1` projection (see `wire::EvidenceBundleView`).
    pub fn evidence_bundle(&self) -> serde_json::Value {
        super::wire::to_value(&super::wire::EvidenceBundleView::of(self))
    }
}

pub fn required_evidence(family: &str) -> Requirement {
    Requirement {
        id: format!("required_evidence:{family}"),
        kind: RequirementKind::RequiredEvidence,
        detail: format!("a current turn must supply {family} with current artifact references"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(json: serde_json::Value) -> Result<StartSpec, Invalid> {
        serde_json::from_value::<StartRequest>(json).unwrap().validate()
    }

    #[test]
    fn start_defaults_follow_the_contract() {
        let spec = start(serde_json::json!({"objective": "x"})).unwrap();
        assert_eq!(spec.max_steps, 12);
        assert_eq!(spec.expires_in_seconds, 3600);
        assert_eq!(spec.contract.min_evidence_refs, 1);
        assert!(spec.contract.require_terminal_authority);
        assert!(spec.contract.required_output_fields.is_empty());
        assert_eq!(spec.contract.max_unresolved_requirements, 0);
        assert!(!spec.contract.allow_conflicts);
    }

    #[test]
    fn start_refuses_out_of_range_budgets() {
        for (steps, secs) in [(0, 3600), (65, 3600), (8, 59), (8, 604_801)] {
            let r = start(
                serde_json::json!({"objective": "x", "budget": {"max_steps": steps, "expires_in_seconds": secs}}),
            );
            assert!(r.is_err(), "{steps} steps, {secs} s");
        }
        assert!(
            start(serde_json::json!({"objective": "x", "budget": {"max_steps": 64, "expires_in_seconds": 604800}}))
                .is_ok()
        );
        assert!(
            start(serde_json::json!({"objective": "x", "budget": {"max_steps": 1, "expires_in_seconds": 60}})).is_ok()
        );
    }

    #[test]
    fn unknown_fields_are_rejected_at_every_level() {
        assert!(serde_json::from_value::<StartRequest>(serde_json::json!({"objective": "x", "owner": "me"})).is_err());
        assert!(
            serde_json::from_value::<StartRequest>(serde_json::json!({"objective": "x", "budget": {"max_step": 3}}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<ContinueRequest>(
                serde_json::json!({"expected_version": 1, "instruction": "go", "x": 1})
            )
            .is_err()
        );
    }

    #[test]
    fn requirement_kinds_keep_their_wire_strings() {
        for kind in ["required_evidence", "turn_failure", "capability"] {
            let r: Requirement =
                serde_json::from_value(serde_json::json!({"id": "x", "kind": kind, "detail": "d"})).unwrap();
            assert_eq!(serde_json::to_value(&r).unwrap()["kind"], kind);
            assert_eq!(r.kind.is_service_owned(), kind != "capability");
        }
        assert_eq!(Completion::BudgetExhausted.as_str(), "budget_exhausted");
        for c in [Completion::Pending, Completion::NeedsMoreEvidence, Completion::Cancelled] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn continuation_needs_instruction_or_answer_and_known_questions() {
        let empty = ContinueRequest { expected_version: 1, instruction: Some("  ".into()), answers: vec![] };
        assert!(empty.validate().is_err());
        let zero = ContinueRequest { expected_version: 0, instruction: Some("go".into()), answers: vec![] };
        assert!(zero.validate().is_err());
        let q = vec![Question { question_id: "q1".into(), prompt: "?".into() }];
        let a = |id: &str| Answer { question_id: id.into(), value: serde_json::json!(true) };
        let twice = ContinueRequest { expected_version: 1, instruction: None, answers: vec![a("q1"), a("q1")] };
        assert!(twice.check_answers(&q).is_err());
        let unknown = ContinueRequest { expected_version: 1, instruction: None, answers: vec![a("q2")] };
        assert!(unknown.check_answers(&q).is_err());
        let ok = ContinueRequest { expected_version: 1, instruction: None, answers: vec![a("q1")] };
        assert!(ok.validate().is_ok() && ok.check_answers(&q).is_ok());
    }
}
