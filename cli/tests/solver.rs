//! The reference turn service as a deployment runs it: `helix solver serve` on one port,
//! `helix serve` on another with HELIX_ASK_ENDPOINT pointing at it over real HTTP, trusting
//! only the public key `helix solver keygen` printed.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const BEARER: &str = "two-process-solver-bearer-0001";

fn keygen(out: &std::path::Path) -> std::process::Output {
    Command::new(BIN).args(["solver", "keygen", "--key-id", "ask-test-1", "--out"]).arg(out).output().unwrap()
}

async fn solver(key: &std::path::Path, port: u16) -> Server {
    let server = Server(
        Command::new(BIN)
            .args(["solver", "serve", "--addr", &format!("127.0.0.1:{port}"), "--key-file"])
            .arg(key)
            .env_remove("HELIX_ENV")
            .env_remove("HELIX_SOLVER_SIGNING_KEY")
            .env("HELIX_ASK_BEARER_TOKEN", BEARER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}/v1/terminal-authority-keys");
    for _ in 0..100 {
        if reqwest::get(&url).await.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("helix solver serve on port {port} did not become ready");
}

#[test]
fn keygen_writes_an_owner_only_private_key_and_prints_only_the_public_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("solver.key");
    let out = keygen(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let public: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(public[0]["issuer"], "helix-ask");
    assert_eq!(public[0]["key_id"], "ask-test-1");
    let private: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let secret = private["private_key"].as_str().unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!printed.contains(secret), "the private key never reaches the terminal");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    assert!(!keygen(&path).status.success(), "an existing key is never replaced");
    let again = Command::new(BIN).args(["solver", "public-key", "--key-file"]).arg(&path).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&again.stdout).unwrap(), public);
}

#[tokio::test]
async fn helix_serve_completes_an_authorized_run_through_the_solver_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("solver.key");
    let out = keygen(&key);
    let public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let solver_port = free_port();
    let _solver = solver(&key, solver_port).await;
    let published: Value = reqwest::get(format!("http://127.0.0.1:{solver_port}/v1/terminal-authority-keys"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(published, serde_json::from_str::<Value>(&public).unwrap());

    let endpoint = format!("http://127.0.0.1:{solver_port}/v1/turns");
    let data = dir.path().join("api");
    let token = dev_token(&data, "dev-user", "dev-tenant");
    let port = free_port();
    let _api = serve(
        &data,
        port,
        &[
            ("HELIX_ASK_ENDPOINT", &endpoint),
            ("HELIX_ASK_BEARER_TOKEN", BEARER),
            ("HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON", &public),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let objective = "What force did Lamoreaux measure between a sphere and a plate?";
    let start = json!({"objective": objective, "database_scope": ["research_library"]});
    let (_, run) =
        support::post_keyed(&client, &format!("{base}/api/v1/agent-runs"), &token, "two-process-run-1", &start).await;
    let id = run["run_id"].as_str().expect("a run");
    let turn_body = json!({"expected_version": 1, "instruction": "Find the torsion pendulum result."});
    let continue_url = format!("{base}/api/v1/agent-runs/{id}/continue");
    let (_, turn) = support::post_keyed(&client, &continue_url, &token, "two-process-turn-1", &turn_body).await;
    assert_eq!(turn["completion_status"], "completed", "{turn}");
    assert_eq!(turn["terminal_authority_status"], "authorized", "{turn}");
}
