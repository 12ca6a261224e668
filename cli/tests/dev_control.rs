//! One server for every walkthrough: `helix dev-token`, `helix dev-session` and
//! `helix account policy` while `helix serve` runs on the same embedded store (which only
//! one process may open) ask the running server over loopback, and what they get works
//! against it. The control route refuses any other caller, with the contract's error.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

mod support;

use support::{BIN, free_port, spawn_ready};

fn helix(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).arg("--data-dir").arg(dir).env_remove("HELIX_ENV").output().unwrap()
}

fn stdout_ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

async fn serve(dir: &std::path::Path, port: u16) -> support::Server {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env_remove("HELIX_ENV")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    spawn_ready(cmd, port, 300).await
}

#[tokio::test]
async fn dev_token_dev_session_and_account_policy_work_while_serve_runs() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = serve(dir.path(), port).await;
    let base = format!("http://127.0.0.1:{port}");
    let who = ["--subject", "walker", "--tenant", "t1"];
    let client = reqwest::Client::new();

    // A token of a new principal, minted and linked by the running server.
    let scopes = "helix.agent_runs.read helix.agent_runs.write helix.rooms.read helix.rooms.manage";
    let token = stdout_ok(helix(dir.path(), &[&["dev-token", "--scope", scopes][..], &who].concat()));
    let res = client.get(format!("{base}/api/v1/agent-runs")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status(), 200, "the token works against the running server: {}", res.text().await.unwrap());

    // A session of the same account.
    let cookie = stdout_ok(helix(dir.path(), &[&["dev-session"][..], &who].concat()));
    let res = client
        .get(format!("{base}/api/account/session/agent-bindings"))
        .header("cookie", format!("helix_session={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let list: Value = res.json().await.unwrap();
    assert_eq!(list["oauth_ready"], true, "the session's account is the token's: {list}");

    // The developer flag, applied by the server on the account's next request.
    let out = stdout_ok(helix(dir.path(), &[&["account", "policy", "--developer", "true"][..], &who].concat()));
    let policy: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(policy["policy"]["developer"], true, "{policy}");

    // Refusals: the contract's error schema, nothing minted.
    let url = format!("{base}/_helix/dev-control");
    let body = json!({"op": "token", "subject": "x", "tenant": "t", "scopes": [], "ttl_seconds": 600});
    let res = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["schema"], "helix.agent_api.error.v1", "{err}");
    assert_eq!(err["error"]["code"], "authentication_required", "{err}");
    let res = client.post(&url).bearer_auth("0".repeat(64)).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 401, "a wrong secret is refused");
    let control: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("dev-control.json")).unwrap()).unwrap();
    let secret = control["secret"].as_str().unwrap();
    let mut extra = body.clone();
    extra["admin"] = json!(true);
    let res = client.post(&url).bearer_auth(secret).json(&extra).send().await.unwrap();
    assert_eq!(res.status(), 400, "unknown fields are refused");
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "invalid_request", "{err}");
    let out = helix(dir.path(), &[&["dev-token", "--ttl-seconds", "5"][..], &who].concat());
    assert!(!out.status.success() && out.stdout.is_empty(), "a bad ttl prints no token");

    // The control file is owner-only, and it goes when the server stops.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("dev-control.json")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let pid = server.0.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    for _ in 0..100 {
        if !dir.path().join("dev-control.json").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!dir.path().join("dev-control.json").exists(), "the control file is removed at shutdown");
    drop(server);

    // No server: the command opens the store itself, as before.
    let token = stdout_ok(helix(dir.path(), &[&["dev-token"][..], &who].concat()));
    assert!(!token.is_empty());
}

#[tokio::test]
async fn a_stale_control_file_falls_back_to_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(
        dir.path().join("dev-control.json"),
        json!({"base_url": format!("http://127.0.0.1:{port}"), "secret": "0".repeat(64)}).to_string(),
    )
    .unwrap();
    let token = stdout_ok(helix(dir.path(), &["dev-token", "--subject", "s", "--tenant", "t"]));
    assert!(!token.is_empty(), "nothing answers at the stale address: the store is opened");
}

#[tokio::test]
async fn a_control_file_naming_a_remote_host_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("dev-control.json"),
        json!({"base_url": "http://192.0.2.1:9000", "secret": "0".repeat(64)}).to_string(),
    )
    .unwrap();
    let out = helix(dir.path(), &["dev-token", "--subject", "s", "--tenant", "t"]);
    assert!(!out.status.success() && out.stdout.is_empty(), "the secret is never sent off this machine");
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}
