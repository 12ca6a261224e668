//! The run's wire requests (start, continue, cancel), strict: unknown fields are refused,
//! and each validates to what the run is created or moved with. Depends on the domain only.

use serde::{Deserialize, Serialize};

use super::*;

/// The steps a run's budget may hold.
pub const MAX_STEPS: std::ops::RangeInclusive<u32> = 1..=64;
/// The seconds a run may live.
pub const EXPIRES_IN_SECONDS: std::ops::RangeInclusive<u64> = 60..=604_800;
/// The database scopes one run may name (distinct).
pub const MAX_DATABASE_SCOPES: usize = 7;
/// The upper bound of a completion contract's counts.
pub const MAX_CONTRACT_COUNT: u32 = 200;
/// Text with at least one character that is not whitespace (what a trim leaves nonempty).
const NOT_BLANK: &str = "\\S";

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    #[schemars(length(min = 1, max = MAX_OBJECTIVE_CHARS), regex(pattern = NOT_BLANK))]
    pub objective: String,
    #[serde(default)]
    #[schemars(length(max = MAX_CONSTRAINTS), inner(length(min = 1, max = MAX_CONSTRAINT_CHARS), regex(pattern = NOT_BLANK)))]
    pub constraints: Vec<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_DATABASE_SCOPES), extend("uniqueItems" = true))]
    pub database_scope: Vec<String>,
    #[serde(default)]
    pub completion_contract: Option<ContractRequest>,
    #[serde(default)]
    pub budget: Option<BudgetRequest>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContractRequest {
    #[schemars(range(max = MAX_CONTRACT_COUNT))]
    pub min_evidence_refs: Option<u32>,
    pub require_terminal_authority: Option<bool>,
    #[schemars(extend("items" = {"type": "string", "enum": OUTPUT_FIELDS}))]
    pub required_output_fields: Option<Vec<String>>,
    #[schemars(range(max = MAX_CONTRACT_COUNT))]
    pub max_unresolved_requirements: Option<u32>,
    pub allow_conflicts: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    #[schemars(range(min = *MAX_STEPS.start(), max = *MAX_STEPS.end()))]
    pub max_steps: Option<u32>,
    #[schemars(range(min = *EXPIRES_IN_SECONDS.start(), max = *EXPIRES_IN_SECONDS.end()))]
    pub expires_in_seconds: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
/// A continuation: a nonempty `instruction`, `answers`, or both (refused otherwise; not
/// stated as an `anyOf`, which generated clients cannot read).
pub struct ContinueRequest {
    #[schemars(range(min = 1))]
    pub expected_version: u64,
    #[serde(default)]
    #[schemars(length(max = MAX_INSTRUCTION_CHARS))]
    pub instruction: Option<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_ANSWERS))]
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
    #[schemars(range(min = 1))]
    pub expected_version: u64,
    #[serde(default)]
    #[schemars(length(max = MAX_REASON_CHARS))]
    pub reason: Option<String>,
}

/// A refused request field: which one and why (becomes `invalid_request`, or
/// `credential_rejected` when the field carries a credential). The message names the
/// field and never quotes its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Invalid {
    pub field: &'static str,
    pub problem: String,
    pub credential: bool,
}

fn invalid(field: &'static str, problem: impl Into<String>) -> Invalid {
    Invalid { field, problem: problem.into(), credential: false }
}

/// A field that carries a credential by the one rule of `domain::credential` (the rule
/// the MCP preflight applies to every argument): refused, whichever front sent it.
fn credential(field: &'static str) -> Invalid {
    Invalid { field, problem: "credential-shaped values are refused".into(), credential: true }
}

/// True when any string of a JSON value (object keys included) carries a credential.
fn value_carries_credential(v: &serde_json::Value) -> bool {
    use crate::domain::credential::{secret_value, text_carries_credential};
    match v {
        serde_json::Value::String(s) => text_carries_credential(s),
        serde_json::Value::Array(a) => a.iter().any(value_carries_credential),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| {
            text_carries_credential(k)
                || matches!(v, serde_json::Value::String(s) if secret_value(k, s))
                || value_carries_credential(v)
        }),
        _ => false,
    }
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
        if objective.is_empty() || self.objective.chars().count() > MAX_OBJECTIVE_CHARS {
            return Err(invalid("objective", format!("must be 1-{MAX_OBJECTIVE_CHARS} characters")));
        }
        if crate::domain::credential::text_carries_credential(&objective) {
            return Err(credential("objective"));
        }
        if self.constraints.len() > MAX_CONSTRAINTS
            || self.constraints.iter().any(|c| c.trim().is_empty() || c.chars().count() > MAX_CONSTRAINT_CHARS)
        {
            return Err(invalid(
                "constraints",
                format!("at most {MAX_CONSTRAINTS} nonempty entries of {MAX_CONSTRAINT_CHARS} characters"),
            ));
        }
        if self.constraints.iter().any(|c| crate::domain::credential::text_carries_credential(c)) {
            return Err(credential("constraints"));
        }
        let mut scopes = self.database_scope.clone();
        scopes.sort();
        scopes.dedup();
        if scopes.len() != self.database_scope.len() || scopes.len() > MAX_DATABASE_SCOPES {
            return Err(invalid("database_scope", format!("entries must be distinct (at most {MAX_DATABASE_SCOPES})")));
        }
        let c = self.completion_contract.unwrap_or(ContractRequest {
            min_evidence_refs: None,
            require_terminal_authority: None,
            required_output_fields: None,
            max_unresolved_requirements: None,
            allow_conflicts: None,
        });
        let fields = c.required_output_fields.unwrap_or_default();
        if fields.iter().any(|f| !OUTPUT_FIELDS.contains(&f.as_str())) {
            return Err(invalid(
                "completion_contract.required_output_fields",
                format!("an unknown output field; known: {}", OUTPUT_FIELDS.join(", ")),
            ));
        }
        let contract = CompletionContract {
            min_evidence_refs: c.min_evidence_refs.unwrap_or(1),
            require_terminal_authority: c.require_terminal_authority.unwrap_or(true),
            required_output_fields: fields,
            max_unresolved_requirements: c.max_unresolved_requirements.unwrap_or(0),
            allow_conflicts: c.allow_conflicts.unwrap_or(false),
        };
        if contract.min_evidence_refs > MAX_CONTRACT_COUNT || contract.max_unresolved_requirements > MAX_CONTRACT_COUNT
        {
            return Err(invalid("completion_contract", format!("counts are 0-{MAX_CONTRACT_COUNT}")));
        }
        let b = self.budget.unwrap_or(BudgetRequest { max_steps: None, expires_in_seconds: None });
        let max_steps = b.max_steps.unwrap_or(12);
        if !MAX_STEPS.contains(&max_steps) {
            return Err(invalid("budget.max_steps", format!("must be {}-{}", MAX_STEPS.start(), MAX_STEPS.end())));
        }
        let expires_in_seconds = b.expires_in_seconds.unwrap_or(3600);
        if !EXPIRES_IN_SECONDS.contains(&expires_in_seconds) {
            let (min, max) = (EXPIRES_IN_SECONDS.start(), EXPIRES_IN_SECONDS.end());
            return Err(invalid("budget.expires_in_seconds", format!("must be {min}-{max}")));
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
        if self.instruction.as_deref().is_some_and(crate::domain::credential::text_carries_credential) {
            return Err(credential("instruction"));
        }
        if self.answers.iter().any(|a| crate::domain::credential::identifier_carries_credential(&a.question_id)) {
            return Err(credential("answers[].question_id"));
        }
        if self.answers.iter().any(|a| value_carries_credential(&a.value)) {
            return Err(credential("answers[].value"));
        }
        Ok(())
    }

    /// Every answer names an outstanding question, each at most once. The message names
    /// the answer by its position, never by the caller's question id.
    pub fn check_answers(&self, pending: &[Question]) -> Result<(), Invalid> {
        let mut seen: Vec<&str> = Vec::new();
        for (i, a) in self.answers.iter().enumerate() {
            if !pending.iter().any(|q| q.question_id == a.question_id) {
                return Err(invalid("answers", format!("answers[{i}].question_id is not an outstanding question")));
            }
            if seen.contains(&a.question_id.as_str()) {
                return Err(invalid("answers", format!("answers[{i}].question_id is answered twice")));
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
        if self.reason.as_deref().is_some_and(crate::domain::credential::text_carries_credential) {
            return Err(credential("reason"));
        }
        Ok(())
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
