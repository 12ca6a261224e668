//! The probe's typed report (`casimirbot.mcp_provider_conformance.v1`) and the one rule
//! that keeps every configured credential out of it: any string (key or value, at any
//! depth) that contains a configured secret value is replaced whole.

use serde::Serialize;
use serde_json::{Map, Value};

pub const SCHEMA: &str = "casimirbot.mcp_provider_conformance.v1";
pub const REDACTED: &str = "[redacted]";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    Skipped,
}

/// One check: what was checked, how it ended and why, plus optional typed details
/// (a run id, the tools a provider saw).
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl Check {
    pub fn pass(name: &'static str, reason: impl Into<String>) -> Self {
        Check { name, status: Status::Pass, reason: reason.into(), details: None }
    }

    pub fn fail(name: &'static str, reason: impl Into<String>) -> Self {
        Check { name, status: Status::Fail, reason: reason.into(), details: None }
    }

    pub fn skipped(name: &'static str, reason: impl Into<String>) -> Self {
        Check { name, status: Status::Skipped, reason: reason.into(), details: None }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// Pass when every problem list is empty, else fail naming the first problems.
    pub fn from_problems(name: &'static str, problems: &[String], ok: impl Into<String>) -> Self {
        match problems {
            [] => Check::pass(name, ok),
            _ => Check::fail(name, problems.iter().take(4).cloned().collect::<Vec<_>>().join("; ")),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub pass: usize,
    pub fail: usize,
    pub skipped: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// The base URL as given (an unparsable one is reported as given, redacted).
    pub target: String,
    pub generated_at: String,
    /// True when no check failed (skipped checks do not fail the report).
    pub passed: bool,
    pub summary: Summary,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn new(target: String, checks: Vec<Check>) -> Self {
        let count = |s| checks.iter().filter(|c| c.status == s).count();
        let summary = Summary { pass: count(Status::Pass), fail: count(Status::Fail), skipped: count(Status::Skipped) };
        Report {
            schema: SCHEMA,
            target,
            generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            passed: summary.fail == 0,
            summary,
            checks,
        }
    }

    /// The report as JSON with every configured secret removed.
    pub fn to_redacted_json(&self, secrets: &[String]) -> Value {
        redact(serde_json::to_value(self).expect("the report serializes"), secrets)
    }
}

/// Replaces every string (object keys included) that contains any non-empty secret.
pub fn redact(value: Value, secrets: &[String]) -> Value {
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
    redact_with(value, &secrets)
}

fn redact_with(value: Value, secrets: &[&str]) -> Value {
    let clean = |s: String| if secrets.iter().any(|secret| s.contains(secret)) { REDACTED.to_owned() } else { s };
    match value {
        Value::String(s) => Value::String(clean(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| redact_with(v, secrets)).collect()),
        Value::Object(map) => {
            let mut out = Map::new();
            for (i, (k, v)) in map.into_iter().enumerate() {
                let key = clean(k);
                // Two redacted keys must not collide and drop a value silently.
                let key = if key == REDACTED { format!("{REDACTED}.{i}") } else { key };
                out.insert(key, redact_with(v, secrets));
            }
            Value::Object(out)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_string_holding_a_secret_is_replaced_at_any_depth() {
        let secrets = vec!["tok-123".to_owned(), "sk-abc".to_owned(), String::new()];
        let value = json!({
            "a": "Bearer tok-123",
            "nested": [{"deep": ["x", "prefix sk-abc suffix"]}],
            "tok-123": 1,
            "sk-abc-key": 2,
            "fine": "nothing here",
            "n": 3,
        });
        let out = redact(value, &secrets);
        let text = out.to_string();
        assert!(!text.contains("tok-123") && !text.contains("sk-abc"), "{text}");
        assert_eq!(out["a"], REDACTED);
        assert_eq!(out["nested"][0]["deep"][1], REDACTED);
        assert_eq!(out["nested"][0]["deep"][0], "x");
        assert_eq!(out["fine"], "nothing here", "an empty secret redacts nothing");
        assert_eq!(out["n"], 3);
        assert_eq!(out.as_object().unwrap().len(), 6, "redacted keys keep their values apart");
    }

    #[test]
    fn the_report_counts_and_passes_only_without_failures() {
        let ok = Report::new("https://x".into(), vec![Check::pass("a", "ok"), Check::skipped("b", "no key")]);
        assert!(ok.passed);
        let bad = Report::new("https://x".into(), vec![Check::pass("a", "ok"), Check::fail("b", "no")]);
        assert!(!bad.passed);
        let json = bad.to_redacted_json(&[]);
        assert_eq!(json["schema"], SCHEMA);
        assert_eq!(json["summary"], json!({"pass": 1, "fail": 1, "skipped": 0}));
        assert_eq!(json["checks"][1]["status"], "fail");
    }
}
