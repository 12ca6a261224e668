//! `helix serve` under `RUST_LOG=trace`: the log never carries a bearer token, an
//! idempotency key, a tool argument or a tool result, and the
//! embedded store is created owner-only like the secrets beside it.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

mod support;

use support::{BIN, Server, free_port};

fn dev_token(dir: &std::path::Path) -> String {
    support::dev_token(dir, "log-user", "log-tenant")
}

async fn mcp(http: &reqwest::Client, url: &str, token: &str, id: u64, name: &str, arguments: Value) -> Value {
    let msg =
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let res = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_ne!(body["result"]["isError"], true, "{body}");
    body["result"]["structuredContent"].clone()
}

#[tokio::test]
async fn serve_at_rust_log_trace_never_logs_tokens_keys_arguments_or_results() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let token = dev_token(dir.path());
    let port = free_port();
    let log_path = logs.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path())
        .env_remove("HELIX_ENV")
        .env("RUST_LOG", "trace,rmcp=trace,aws_sigv4=trace,hyper=trace,h2=trace")
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let server = Server(child);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut ready = false;
    for _ in 0..100 {
        if http
            .get(format!("{base}/.well-known/oauth-protected-resource"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "helix serve did not become ready");

    let url = format!("{base}/mcp");
    let objective = "What force did Lamoreaux measure between a sphere and a plate (probe zebra-quokka)?";
    let start = json!({"idempotency_key": "log-probe-start-0001",
        "request": {"objective": objective, "database_scope": ["research_library"]}});
    let run = mcp(&http, &url, &token, 1, "helix_run_start", start).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let cont = json!({"run_id": run_id, "idempotency_key": "log-probe-cont-0001",
        "request": {"expected_version": 1, "instruction": "Find the measured force (probe okapi-narwhal)."}});
    let turned = mcp(&http, &url, &token, 2, "helix_run_continue", cont).await;
    let summary = turned["latest_result"]["summary"].as_str().unwrap_or_default().to_owned();
    mcp(&http, &url, &token, 3, "helix_run_inspect", json!({"run_id": run_id})).await;
    let rest = http
        .post(format!("{base}/api/v1/agent-runs"))
        .bearer_auth(&token)
        .header("Idempotency-Key", "log-probe-rest-0001")
        .json(&json!({"objective": "Casimir probe wombat-lynx", "database_scope": ["research_library"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 201);
    drop(server);

    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(text.contains("request"), "the access log is written: {text}");
    let secret = std::fs::read_to_string(dir.path().join("local-hs256.secret")).unwrap();
    let mut never = vec![
        token.as_str(),
        secret.trim(),
        "log-probe-start-0001",
        "log-probe-cont-0001",
        "log-probe-rest-0001",
        "zebra-quokka",
        "okapi-narwhal",
        "wombat-lynx",
        "structuredContent",
    ];
    if summary.len() >= 24 {
        never.push(&summary);
    }
    for value in never {
        assert!(!text.contains(value), "the log carries {value:?}");
    }
}

#[test]
fn the_embedded_store_is_created_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    dev_token(dir.path());
    let meta = std::fs::metadata(dir.path().join("helix.redb")).unwrap();
    #[cfg(unix)]
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600);
    // A store created before this rule is tightened on the next open.
    #[cfg(unix)]
    {
        let path = dir.path().join("helix.redb");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        dev_token(dir.path());
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
    }
}
