//! What every test of the `helix` binary starts with: the binary, a free port, a dev token
//! and `helix serve` on an embedded store, stopped when dropped.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_helix");

/// A child process killed (and reaped) when dropped.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `helix dev-token` for `subject` under `tenant` on the store in `dir`, with `extra_env`.
pub fn dev_token_output(dir: &Path, subject: &str, tenant: &str, extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["dev-token", "--subject", subject, "--tenant", tenant, "--data-dir"]).arg(dir).env_remove("HELIX_ENV");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The token alone, asserting that the command succeeded.
pub fn dev_token(dir: &Path, subject: &str, tenant: &str) -> String {
    let out = dev_token_output(dir, subject, tenant, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `helix serve` on `127.0.0.1:port` over the store in `dir`, with `env`, once it answers.
pub async fn serve(dir: &Path, port: u16, env: &[(&str, &str)]) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env_remove("HELIX_ENV")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    spawn_ready(cmd, port, 100).await
}

/// Spawns `cmd` (a `helix serve` on `127.0.0.1:port`) and returns it once its discovery
/// route answers, polling every 100 ms at most `attempts` times.
pub async fn spawn_ready(mut cmd: Command, port: u16, attempts: u32) -> Server {
    let server = Server(cmd.spawn().unwrap());
    let url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource");
    for _ in 0..attempts {
        if reqwest::get(&url).await.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("helix serve on port {port} did not become ready");
}

/// `POST url` as a client of the REST lane: the bearer `token`, `Idempotency-Key: key` and
/// the JSON `body`; the status and the JSON answer.
pub async fn post_keyed(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    key: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let res = client.post(url).bearer_auth(token).header("Idempotency-Key", key).json(body).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

/// The user of the CLI tests that need no other: `cli-user` under `cli-tenant`, on an
/// embedded store served with no extra environment.
pub mod cli_user {
    use std::path::Path;

    use super::Server;

    /// `helix dev-token` for `cli-user` under `cli-tenant` on the store in `dir`, with `extra_env`.
    pub fn dev_token(dir: &Path, extra_env: &[(&str, &str)]) -> std::process::Output {
        super::dev_token_output(dir, "cli-user", "cli-tenant", extra_env)
    }

    /// `helix serve` on `127.0.0.1:port` over the store in `dir`, once it answers.
    pub async fn serve(dir: &Path, port: u16) -> Server {
        super::serve(dir, port, &[]).await
    }
}
