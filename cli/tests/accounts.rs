//! The `helix` binary's identity commands as a user runs them: `dev-session` (and its
//! refusal in production), `account show` and `account policy` applied on the next request,
//! and the development issuer's key in the data dir and its refusals.

use std::process::Command;

use serde_json::{Value, json};

mod support;

use support::cli_user::{dev_token, serve};
use support::{BIN, free_port};

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

/// The development issuer's key is generated once into the data dir (owner-only) and its
/// public half is published at the JWKS URL; a restart keeps the same key.
#[tokio::test]
async fn serve_keeps_the_dev_issuer_key_in_the_data_dir_and_publishes_its_jwks() {
    let dir = tempfile::tempdir().unwrap();
    let kid = |set: &serde_json::Value| set["keys"][0]["kid"].as_str().unwrap().to_owned();
    let mut kids = Vec::new();
    for _ in 0..2 {
        // Minted before serve holds the embedded store.
        let token = support::dev_token(dir.path(), "dev-user", "dev-tenant");
        let port = free_port();
        let _server = serve(dir.path(), port).await;
        let set: serde_json::Value =
            reqwest::get(format!("http://127.0.0.1:{port}/oauth/jwks")).await.unwrap().json().await.unwrap();
        assert_eq!(set["keys"][0]["alg"], "ES256", "{set}");
        assert!(set["keys"][0].get("d").is_none(), "no private part");
        kids.push(kid(&set));
        let base = format!("http://127.0.0.1:{port}");
        let get = |path: &str| reqwest::get(format!("{base}{path}"));
        let prm: Value = get("/.well-known/oauth-protected-resource/mcp").await.unwrap().json().await.unwrap();
        assert_eq!(prm["authorization_servers"], json!([base]), "the resource names the development issuer");
        let meta: Value = get("/.well-known/oauth-authorization-server").await.unwrap().json().await.unwrap();
        assert_eq!(meta["issuer"], base);
        // A `helix dev-token` (local HS256) still works beside the JWKS path.
        let res = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/api/v1/agent-runs/run_abcdefgh12"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "authenticated, then no such run");
    }
    assert_eq!(kids[0], kids[1], "the key survives a restart");
    let meta = std::fs::metadata(dir.path().join("dev-issuer-es256.key")).unwrap();
    #[cfg(unix)]
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600);
}

#[test]
fn serve_is_refused_in_production_before_any_dev_issuer_key_exists() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("HELIX_ENV", "production")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("production") && stderr.contains("development authorization server"), "{stderr}");
    assert!(!dir.path().join("dev-issuer-es256.key").exists());
}

#[test]
fn serve_off_loopback_is_refused_while_the_development_issuer_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::BIN)
        .args(["serve", "--addr", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("HELIX_ENV")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("development issuer") && stderr.contains("loopback"), "{stderr}");
    assert!(!dir.path().join("dev-issuer-es256.key").exists());
}
