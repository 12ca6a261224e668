//! The `helix` binary as a user runs it: serve, dev-token, restart durability, and two
//! `helix serve` processes on one DynamoDB table. Its identity commands are in `accounts`.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

mod support;

use support::cli_user::{dev_token, serve};
use support::{BIN, Server, free_port, post_keyed};

#[tokio::test]
async fn runs_survive_a_restart_of_helix_serve_and_dev_tokens_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dev_token(dir.path(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "stdout is only the JWT");

    let port = free_port();
    let run: Value = {
        let _server = serve(dir.path(), port).await;
        let res = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/api/v1/agent-runs"))
            .bearer_auth(&token)
            .header("Idempotency-Key", "cli-durable-001")
            .json(&json!({"objective": "What did Lamoreaux measure?", "database_scope": ["research_library"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        res.json().await.unwrap()
    };
    let _server = serve(dir.path(), port).await;
    let id = run["run_id"].as_str().unwrap();
    let client = reqwest::Client::new();
    let got: Value = client
        .get(format!("http://127.0.0.1:{port}/api/v1/agent-runs/{id}"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got, run, "the run is still there after a restart");

    // The local executor answers from the bundled corpus with verified authority.
    let turn_body = json!({"expected_version": 1, "instruction": "Find the torsion pendulum result."});
    let continue_url = format!("http://127.0.0.1:{port}/api/v1/agent-runs/{id}/continue");
    let (_, turn) = post_keyed(&client, &continue_url, &token, "cli-durable-turn-1", &turn_body).await;
    assert_eq!(turn["completion_status"], "completed", "{turn}");
    assert_eq!(turn["terminal_authority_status"], "authorized");
}

#[test]
fn dev_token_is_refused_in_production() {
    let dir = tempfile::tempdir().unwrap();
    let out = dev_token(dir.path(), &[("HELIX_ENV", "production")]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no token is printed");
}

#[test]
fn the_local_secret_is_kept_in_the_data_dir_with_owner_only_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let first = dev_token(dir.path(), &[]);
    assert!(first.status.success());
    let meta = std::fs::metadata(dir.path().join("local-hs256.secret")).unwrap();
    #[cfg(unix)]
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600);
    let secret = std::fs::read_to_string(dir.path().join("local-hs256.secret")).unwrap();
    assert!(secret.trim().len() >= 32);
    let again = dev_token(dir.path(), &[]);
    assert!(again.status.success(), "the same data dir keeps working");
}

/// `create-table`, `dev-token --store dynamodb` and `serve --store dynamodb` against the
/// emulator `scripts/test` starts (endpoint from the AWS SDK's own environment).
#[tokio::test]
async fn serve_and_dev_token_work_on_dynamodb_with_a_created_table() {
    let endpoint = std::env::var("HELIX_TEST_DYNAMODB_ENDPOINT")
        .expect("HELIX_TEST_DYNAMODB_ENDPOINT: run the tests through scripts/test, which starts the emulator");
    let dir = tempfile::tempdir().unwrap();
    let table = format!("helix-cli-{}", std::process::id());
    let aws = |cmd: &mut Command| {
        cmd.env("AWS_ENDPOINT_URL_DYNAMODB", &endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("HELIX_ENV");
    };
    for _ in 0..2 {
        let mut create = Command::new(BIN);
        create.args(["create-table", "--table", &table]);
        aws(&mut create);
        let out = create.output().unwrap();
        assert!(out.status.success(), "create-table is idempotent: {}", String::from_utf8_lossy(&out.stderr));
    }
    let port = free_port();
    let mut serve = Command::new(BIN);
    serve.args([
        "serve",
        "--addr",
        &format!("127.0.0.1:{port}"),
        "--store",
        "dynamodb",
        "--table",
        &table,
        "--data-dir",
    ]);
    serve.arg(dir.path()).stdout(Stdio::null()).stderr(Stdio::null());
    aws(&mut serve);
    let _server = Server(serve.spawn().unwrap());
    let mut token = Command::new(BIN);
    token.args([
        "dev-token",
        "--subject",
        "dyn-user",
        "--tenant",
        "dyn-tenant",
        "--store",
        "dynamodb",
        "--table",
        &table,
    ]);
    token.arg("--data-dir").arg(dir.path());
    aws(&mut token);
    let out = token.output().unwrap();
    assert!(
        out.status.success(),
        "dev-token runs beside a DynamoDB-backed server: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}");
    let mut started = None;
    for _ in 0..100 {
        let res = client
            .post(format!("{url}/api/v1/agent-runs"))
            .bearer_auth(&token)
            .header("Idempotency-Key", "cli-dynamo-start-1")
            .json(&json!({"objective": "What did Lamoreaux measure?"}))
            .send()
            .await;
        if let Ok(res) = res {
            started = Some(res);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let res = started.expect("helix serve --store dynamodb did not answer");
    assert_eq!(res.status(), 201);
    let run: Value = res.json().await.unwrap();
    let id = run["run_id"].as_str().unwrap();
    let got = client.get(format!("{url}/api/v1/agent-runs/{id}")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(got.status(), 200);
}

/// A fresh table on the emulator `scripts/test` starts; commands get its endpoint through
/// the AWS SDK's own environment, as an operator's would.
struct Table {
    endpoint: String,
    name: String,
}

impl Table {
    fn create(tag: &str) -> Table {
        let endpoint = std::env::var("HELIX_TEST_DYNAMODB_ENDPOINT")
            .expect("HELIX_TEST_DYNAMODB_ENDPOINT: run the tests through scripts/test, which starts the emulator");
        let table = Table { endpoint, name: format!("helix-cli-{tag}-{}", std::process::id()) };
        let out = table.command(&["create-table", "--table", &table.name]).output().unwrap();
        assert!(out.status.success(), "create-table: {}", String::from_utf8_lossy(&out.stderr));
        table
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("AWS_ENDPOINT_URL_DYNAMODB", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("HELIX_ENV");
        cmd
    }

    /// `helix dev-token` linked in this table (the data dir holds the shared HS256 secret).
    fn dev_token(&self, dir: &std::path::Path) -> String {
        let mut cmd = self.command(&[
            "dev-token",
            "--subject",
            "two-process-user",
            "--tenant",
            "two-process-tenant",
            "--store",
            "dynamodb",
            "--table",
            &self.name,
        ]);
        let out = cmd.arg("--data-dir").arg(dir).output().unwrap();
        assert!(out.status.success(), "dev-token: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// `helix serve --store dynamodb --table T` on `port`, ready to answer.
    async fn serve(&self, dir: &std::path::Path, port: u16, env: &[(&str, &str)]) -> Server {
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = self.command(&["serve", "--addr", &addr, "--store", "dynamodb", "--table", &self.name]);
        cmd.arg("--data-dir").arg(dir).stdout(Stdio::null()).stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        support::spawn_ready(cmd, port, 200).await
    }
}

/// Waits until at least `secs` seconds remain in the current minute, so a test's requests
/// fall into one per-minute window.
async fn start_of_a_window(secs: u64) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let left = 60 - now % 60;
    if left < secs {
        tokio::time::sleep(Duration::from_secs(left) + Duration::from_millis(200)).await;
    }
}

/// Two `helix serve` processes on one table count one principal's requests in one window:
/// 4 allowed per minute in all, not 4 per process.
#[tokio::test]
async fn two_servers_on_one_table_share_one_principals_rate_limit() {
    let table = Table::create("rl");
    let dir = tempfile::tempdir().unwrap();
    let token = table.dev_token(dir.path());
    let env = [("HELIX_AGENT_PRINCIPAL_RATE_LIMIT", "4")];
    let (port_a, port_b) = (free_port(), free_port());
    let _a = table.serve(dir.path(), port_a, &env).await;
    let _b = table.serve(dir.path(), port_b, &env).await;
    let client = reqwest::Client::new();
    start_of_a_window(10).await;
    let mut statuses = vec![];
    for port in [port_a, port_a, port_a, port_b, port_b, port_a] {
        let res = client
            .get(format!("http://127.0.0.1:{port}/api/v1/agent-runs/run_abcdefgh12"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        if status == 429 {
            let retry: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&retry), "Retry-After {retry}");
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["code"], "rate_limited");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [404, 404, 404, 404, 429, 429], "one window across both processes");
}

/// Two `helix serve` processes on one table count one address's requests in one window.
#[tokio::test]
async fn two_servers_on_one_table_share_one_addresss_rate_limit() {
    let table = Table::create("iprl");
    let dir = tempfile::tempdir().unwrap();
    let env = [("HELIX_AGENT_IP_RATE_LIMIT", "3")];
    let (port_a, port_b) = (free_port(), free_port());
    let _a = table.serve(dir.path(), port_a, &env).await;
    let _b = table.serve(dir.path(), port_b, &env).await;
    let client = reqwest::Client::new();
    start_of_a_window(10).await;
    let mut statuses = vec![];
    for port in [port_a, port_b, port_a, port_b, port_a] {
        let url = format!("http://127.0.0.1:{port}/api/v1/agent-runs/run_abcdefgh12");
        statuses.push(client.get(url).send().await.unwrap().status().as_u16());
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429], "one window across both processes");
}

/// What the fake Helix Ask saw of one turn request.
#[derive(Debug)]
enum AskEvent {
    Received,
    Dropped(std::time::Instant),
}

/// A Helix Ask that reads each turn request and never answers; it reports when a
/// request arrived and when its connection was closed by the caller.
async fn slow_helix_ask() -> (String, tokio::sync::mpsc::UnboundedReceiver<AskEvent>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/turns", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                let mut announced = false;
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            let _ = tx.send(AskEvent::Dropped(std::time::Instant::now()));
                            return;
                        }
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    if !announced && complete_request(&seen) {
                        announced = true;
                        let _ = tx.send(AskEvent::Received);
                    }
                }
            });
        }
    });
    (url, rx)
}

/// True once `bytes` hold a request's headers and its whole Content-Length body.
fn complete_request(bytes: &[u8]) -> bool {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    bytes.len() >= end + 4 + length
}

/// A turn running on one process stops within 2 s of a cancel committed through another:
/// its Helix Ask request is dropped, the cancel answers as usual, and the turn finalizes
/// nothing (the run ends `cancelled` with contiguous events).
#[tokio::test]
async fn a_cancel_through_one_server_stops_the_turn_running_on_another() {
    let table = Table::create("cancel");
    let dir = tempfile::tempdir().unwrap();
    let token = table.dev_token(dir.path());
    let (ask_url, mut ask) = slow_helix_ask().await;
    let env = [("HELIX_ASK_ENDPOINT", ask_url.as_str()), ("HELIX_AGENT_TURN_TIMEOUT_MS", "60000")];
    let (port_a, port_b) = (free_port(), free_port());
    let _a = table.serve(dir.path(), port_a, &env).await;
    let _b = table.serve(dir.path(), port_b, &env).await;
    let (a, b) = (format!("http://127.0.0.1:{port_a}"), format!("http://127.0.0.1:{port_b}"));
    let client = reqwest::Client::new();

    let run: Value = client
        .post(format!("{a}/api/v1/agent-runs"))
        .bearer_auth(&token)
        .header("Idempotency-Key", "two-process-start-1")
        .json(&json!({"objective": "What did Lamoreaux measure?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = run["run_id"].as_str().expect("a started run").to_owned();
    let turn = {
        let (client, url, token) = (client.clone(), format!("{a}/api/v1/agent-runs/{id}/continue"), token.clone());
        tokio::spawn(async move {
            let res = client
                .post(url)
                .bearer_auth(&token)
                .header("Idempotency-Key", "two-process-turn-1")
                .json(&json!({"expected_version": 1, "instruction": "Find the torsion pendulum result."}))
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        })
    };
    let arrived = tokio::time::timeout(Duration::from_secs(20), ask.recv()).await;
    assert!(matches!(arrived, Ok(Some(AskEvent::Received))), "the turn reached Helix Ask: {arrived:?}");

    let cancel = client
        .post(format!("{b}/api/v1/agent-runs/{id}/cancel"))
        .bearer_auth(&token)
        .header("Idempotency-Key", "two-process-cancel-1")
        .json(&json!({"expected_version": 1}))
        .send()
        .await
        .unwrap();
    let cancelled_at = std::time::Instant::now();
    assert_eq!(cancel.status(), 200);
    let cancelled: Value = cancel.json().await.unwrap();
    assert_eq!(cancelled["completion_status"], "cancelled");
    assert_eq!(cancelled["version"], 2);

    let dropped = tokio::time::timeout(Duration::from_secs(10), ask.recv()).await;
    let Ok(Some(AskEvent::Dropped(at))) = dropped else { panic!("the Helix Ask request was not dropped: {dropped:?}") };
    let after = at.saturating_duration_since(cancelled_at);
    eprintln!("the Helix Ask request was dropped {after:?} after the cancel committed");
    assert!(after <= Duration::from_secs(2), "the turn noticed the cancel {after:?} after it committed");

    let (status, body) = tokio::time::timeout(Duration::from_secs(10), turn).await.expect("the turn answered").unwrap();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "run_not_continuable");
    let got: Value = client
        .get(format!("{a}/api/v1/agent-runs/{id}"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["completion_status"], "cancelled");
    assert_eq!(got["version"], 2);
    assert_eq!(got["budget"]["steps_used"], 0, "the stopped turn consumed nothing");
    let page: Value = client
        .get(format!("{b}/api/v1/agent-runs/{id}/events"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events = page["events"].as_array().unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2], "contiguous");
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run_started", "run_cancelled"]);
}
