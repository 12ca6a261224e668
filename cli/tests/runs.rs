//! `helix runs list` and `helix runs tail` against a live `helix serve`: the list shows
//! the token's runs; tail follows a run whose turn runs meanwhile, prints its events with
//! their human labels and exits when the run has ended.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

mod support;

use support::{BIN, free_port};

fn helix_runs(args: &[&str], base: &str, token: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("runs").args(args).args(["--base-url", base]).env("HELIX_TOKEN", token).env_remove("HELIX_BASE_URL");
    cmd
}

#[tokio::test]
async fn runs_tail_follows_a_live_run_until_it_ends_and_runs_list_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = support::dev_token(dir.path(), "tail-user", "tail-tenant");
    let port = free_port();
    let _server = support::serve(dir.path(), port, &[]).await;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let start = json!({"objective": "What did Lamoreaux measure?", "database_scope": ["research_library"]});
    let (_, run) =
        support::post_keyed(&client, &format!("{base}/api/v1/agent-runs"), &token, "cli-tail-start-1", &start).await;
    let id = run["run_id"].as_str().unwrap().to_owned();

    let tail = helix_runs(&["tail", &id, "--interval-ms", "100"], &base, &token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let turn_body = json!({"expected_version": 1, "instruction": "Find the torsion pendulum result."});
    let continue_url = format!("{base}/api/v1/agent-runs/{id}/continue");
    let (status, _) = support::post_keyed(&client, &continue_url, &token, "cli-tail-turn-01", &turn_body).await;
    assert_eq!(status, 200);
    let out = tokio::task::spawn_blocking(move || tail.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("#1    Run started"), "{stdout}");
    assert!(stdout.contains("Run completed"), "the turn's events followed: {stdout}");
    assert!(stdout.contains("ended: ") && stdout.contains("completed / completed"), "{stdout}");
    assert!(!stdout.contains(&token), "the token is never printed");

    let out = helix_runs(&["list"], &base, &token).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&id) && stdout.contains("What did Lamoreaux measure?"), "{stdout}");
    let out = helix_runs(&["list", "--status", "cancelled"], &base, &token).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no runs on this page");
    let out = helix_runs(&["list", "--status", "nope"], &base, &token).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_request"));
    let out = helix_runs(&["list"], &base, "").output().unwrap();
    assert!(!out.status.success(), "no HELIX_TOKEN, no request");
}
