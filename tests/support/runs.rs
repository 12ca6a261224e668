//! Agent runs over REST: start, continue, cancel and events on `TestApp`, and the scripted
//! artifacts and steps that complete a run. Knows the run routes only, no room or source.

use helix_core::executor::scripted::Step;
use serde_json::{Value, json};

use crate::{TestApp, read};

impl TestApp {
    pub async fn start(&self, token: &str, key: &str, body: Value) -> reqwest::Response {
        self.post("/api/v1/agent-runs", token).header("Idempotency-Key", key).json(&body).send().await.unwrap()
    }

    /// Starts a research_library run and returns its body.
    pub async fn started(&self, token: &str, body: Value) -> Value {
        let key = format!("start-{}", helix_core::domain::random_hex(6));
        let res = self.start(token, &key, body).await;
        assert_eq!(res.status(), 201, "start failed");
        res.json().await.unwrap()
    }

    pub async fn continue_run(&self, token: &str, run_id: &str, key: &str, body: Value) -> reqwest::Response {
        self.post(&format!("/api/v1/agent-runs/{run_id}/continue"), token)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// A continuation with `Prefer: respond-async` (the turn runs in the background).
    pub async fn continue_async(&self, token: &str, run_id: &str, key: &str, body: Value) -> reqwest::Response {
        self.post(&format!("/api/v1/agent-runs/{run_id}/continue"), token)
            .header("Idempotency-Key", key)
            .header("Prefer", "respond-async")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Polls inspect (sparingly: the principal rate limit counts every read) until the run
    /// reaches `version` or `within` passes; returns the last run read.
    pub async fn until_version(&self, token: &str, run_id: &str, version: u64, within: std::time::Duration) -> Value {
        let until = std::time::Instant::now() + within;
        loop {
            let run: Value =
                self.get(&format!("/api/v1/agent-runs/{run_id}"), token).send().await.unwrap().json().await.unwrap();
            if run["version"] == version || std::time::Instant::now() > until {
                return run;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    pub async fn cancel(&self, token: &str, run_id: &str, key: &str, body: Value) -> reqwest::Response {
        self.post(&format!("/api/v1/agent-runs/{run_id}/cancel"), token)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub async fn events(&self, token: &str, run_id: &str) -> Vec<Value> {
        let res = self.get(&format!("/api/v1/agent-runs/{run_id}/events?limit=200"), token).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let page: Value = res.json().await.unwrap();
        page["events"].as_array().unwrap().clone()
    }

    /// One continuation of `run_id` at its current version; asserts it was answered 200.
    pub async fn turn_with(&self, token: &str, run_id: &str, instruction: &str) -> Value {
        let run: Value =
            self.get(&format!("/api/v1/agent-runs/{run_id}"), token).send().await.unwrap().json().await.unwrap();
        let key = format!("turn-{}", helix_core::domain::random_hex(6));
        let (status, v) = read(
            self.continue_run(
                token,
                run_id,
                &key,
                json!({ "expected_version": run["version"], "instruction": instruction }),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        v
    }
}

/// The failure code of a run's latest result ("" when it has none).
pub fn failure(v: &Value) -> &str {
    v["latest_result"]["failure_code"].as_str().unwrap_or("")
}

/// A solver artifact with `n` research_library evidence items.
pub fn evidence_artifact(n: usize) -> helix_core::domain::turn::TurnArtifact {
    let evidence = (0..n)
        .map(|i| helix_core::domain::turn::ArtifactEvidence {
            reference: format!("evidence:test:{i}"),
            family: "research_library_evidence".into(),
            source: format!("research-library://doc{i}.md#p0"),
            content_sha256: helix_core::domain::sha256_hex(format!("passage {i}")),
            excerpt: format!("passage {i}"),
        })
        .collect();
    serde_json::from_value::<helix_core::domain::turn::TurnArtifact>(json!({
        "solver_status": "succeeded",
        "summary": "found passages",
        "satisfied_evidence_families": ["research_library_evidence"],
    }))
    .map(|mut a| {
        a.evidence = evidence;
        a
    })
    .unwrap()
}

/// A scripted step that completes a research_library run with `n` pieces of evidence.
pub fn completing_step(n: usize) -> Step {
    let artifact = evidence_artifact(n);
    let refs = artifact.evidence.iter().map(|e| e.reference.clone()).collect();
    Step::Signed { artifact, text: "The measured force agrees with theory within 5%.".into(), refs }
}

pub fn research_run() -> Value {
    json!({ "objective": "Summarize the measured Casimir force.", "database_scope": ["research_library"] })
}

/// Asserts events are numbered 1..=n without gaps.
pub fn assert_contiguous(events: &[Value]) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"].as_u64().unwrap(), i as u64 + 1, "events must be contiguous: {events:?}");
    }
}

pub fn kinds(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["kind"].as_str().unwrap().to_owned()).collect()
}
