//! The `helix` binary as a user runs it: serve, dev-token, restart durability.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_helix");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn serve(dir: &std::path::Path, port: u16) -> Server {
    let child = Command::new(BIN)
        .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env_remove("HELIX_ENV")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    let url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource");
    for _ in 0..100 {
        if reqwest::get(&url).await.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("helix serve did not become ready");
}

fn dev_token(dir: &std::path::Path, extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["dev-token", "--subject", "cli-user", "--tenant", "cli-tenant", "--data-dir"])
        .arg(dir)
        .env_remove("HELIX_ENV");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

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
    let turn: Value = client
        .post(format!("http://127.0.0.1:{port}/api/v1/agent-runs/{id}/continue"))
        .bearer_auth(&token)
        .header("Idempotency-Key", "cli-durable-turn-1")
        .json(&json!({"expected_version": 1, "instruction": "Find the torsion pendulum result."}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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

fn helix(dir: &std::path::Path, args: &[&str], extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).arg("--data-dir").arg(dir).env_remove("HELIX_ENV");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

async fn bindings(port: u16, cookie: &str) -> (u16, Value) {
    let res = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/account/session/agent-bindings"))
        .header("cookie", format!("helix_session={cookie}"))
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn dev_session_prints_a_cookie_for_the_account_dev_token_links() {
    let dir = tempfile::tempdir().unwrap();
    let who = ["--subject", "cli-user", "--tenant", "cli-tenant"];
    let out = helix(dir.path(), &[&["dev-session"][..], &who].concat(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cookie = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(cookie.len(), 64, "stdout is only the cookie value");
    assert!(cookie.bytes().all(|b| b.is_ascii_hexdigit()));
    let out = dev_token(dir.path(), &[]);
    assert!(out.status.success());

    let port = free_port();
    let _server = serve(dir.path(), port).await;
    let (status, list) = bindings(port, &cookie).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["oauth_ready"], true, "dev-token linked the same account: {list}");
    assert_eq!(list["bindings"].as_array().unwrap().len(), 1);
}

#[test]
fn dev_session_is_refused_in_production() {
    let dir = tempfile::tempdir().unwrap();
    let out = helix(dir.path(), &["dev-session", "--subject", "s", "--tenant", "t"], &[("HELIX_ENV", "production")]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no cookie is printed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("production"));
}

#[tokio::test]
async fn account_policy_is_shown_and_set_by_the_operator_and_applies_on_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let who = ["--subject", "cli-user", "--tenant", "cli-tenant"];
    let out = helix(dir.path(), &["account", "show", who[0], who[1], who[2], who[3]], &[]);
    assert!(!out.status.success(), "no account yet");
    assert!(dev_token(dir.path(), &[]).status.success());
    let cookie = String::from_utf8(helix(dir.path(), &[&["dev-session"][..], &who].concat(), &[]).stdout).unwrap();
    let out = helix(
        dir.path(),
        &[
            &["account", "policy"][..],
            &who,
            &["--guest", "true", "--rooms-locked", "true", "--deny-capability", "research-library.read_document"],
        ]
        .concat(),
        &[],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = helix(dir.path(), &[&["account", "show"][..], &who].concat(), &[]);
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let policy = &shown["account"]["policy"];
    assert_eq!(
        (policy["guest"].clone(), policy["rooms_locked"].clone(), policy["developer"].clone()),
        (json!(true), json!(true), json!(false))
    );
    assert_eq!(policy["denied_capabilities"], json!(["research-library.read_document"]));
    assert_eq!(shown["identity_binding"]["status"], "active");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("cli-user") && !text.contains("cli-tenant"), "opaque references only: {text}");

    let port = free_port();
    {
        let _server = serve(dir.path(), port).await;
        let (status, body) = bindings(port, cookie.trim()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("guest_not_allowed")));
    }
    let out = helix(dir.path(), &[&["account", "policy"][..], &who, &["--guest", "false"]].concat(), &[]);
    assert!(out.status.success());
    let _server = serve(dir.path(), port).await;
    assert_eq!(bindings(port, cookie.trim()).await.0, 200);
}
