//! The running development server's control route, so `helix dev-token`, `helix dev-session`
//! and `helix account policy` work while `helix serve` holds the embedded store (one process
//! at a time may open it). They never open the store behind the server's back: they ask it.
//!
//! Only `helix serve` in development, on a loopback address, mounts the route. At start it
//! writes `dev-control.json` (owner-only, a fresh random secret each start) into its data
//! dir; a command with the same `--data-dir` reads it and presents the secret as a bearer
//! over loopback. Anyone who can read the data dir can already read the local signing
//! secret, so the route gives nobody more than the files do. The file is removed when the
//! server stops; a stale file (no server answering) is ignored and the store opened as before.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use helix_core::config::Secret;
use helix_core::domain::account::PolicyChange;
use helix_core::domain::random_hex;
use helix_core::error::ApiError;
use helix_core::http::AppState;
use helix_core::service::accounts::LinkIdentity;
use serde::{Deserialize, Serialize};

/// The file in the data dir that names the running server and its control secret.
pub const CONTROL_FILE: &str = "dev-control.json";
/// The route (POST, loopback, development only).
pub const CONTROL_PATH: &str = "/_helix/dev-control";

/// What `helix serve` writes into its data dir.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ControlFile {
    base_url: String,
    secret: String,
}

/// One request to the running server: what the command would have done on the store.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ControlRequest {
    /// `helix dev-token`: link the principal, then mint its token.
    Token { subject: String, tenant: String, scopes: Vec<String>, ttl_seconds: i64 },
    /// `helix dev-session`: a session of this identity's account.
    Session { subject: String, tenant: String },
    /// `helix account policy`.
    Policy {
        subject: String,
        provider: Option<String>,
        rooms_locked: Option<bool>,
        developer: Option<bool>,
        guest: Option<bool>,
        denied_capabilities: Option<Vec<String>>,
    },
}

/// The answer: the text the command prints (a token, a cookie value) or the policy.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlAnswer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<serde_json::Value>,
}

/// The running server's side: its secret, held in memory and in the data dir's file.
#[derive(Clone)]
pub struct Control {
    state: AppState,
    secret: std::sync::Arc<String>,
}

/// Writes the control file (0600, replaced atomically) and returns the router and a guard
/// that removes the file when dropped (the server stopped).
pub fn mount(state: AppState, data_dir: &Path, base_url: &str) -> anyhow::Result<(axum::Router, ControlFileGuard)> {
    let secret = random_hex(32);
    let path = data_dir.join(CONTROL_FILE);
    let tmp = data_dir.join(format!(".{CONTROL_FILE}.{}.tmp", std::process::id()));
    {
        use std::io::Write;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let body = ControlFile { base_url: base_url.to_owned(), secret: secret.clone() };
        f.write_all(serde_json::to_string(&body)?.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    let control = Control { state, secret: std::sync::Arc::new(secret) };
    let router = axum::Router::new().route(CONTROL_PATH, axum::routing::post(handle)).with_state(control);
    Ok((router, ControlFileGuard(path)))
}

/// Removes the control file when the server stops.
pub struct ControlFileGuard(PathBuf);

impl Drop for ControlFileGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn presented_secret(headers: &HeaderMap) -> Option<&str> {
    headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")
}

async fn handle(State(c): State<Control>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    match answer(&c, &headers, &body).await {
        Ok(a) => axum::Json(a).into_response(),
        // Outside the API pipeline: the error is rendered here, in the contract's schema.
        Err(e) => {
            let request_id = format!("req_{}", random_hex(8));
            (e.status(), axum::Json(e.body(&request_id))).into_response()
        }
    }
}

async fn answer(c: &Control, headers: &HeaderMap, body: &[u8]) -> Result<ControlAnswer, ApiError> {
    let config = &c.state.services.config;
    if config.mode == helix_core::config::Mode::Production {
        return Err(ApiError::NotFound);
    }
    let presented = presented_secret(headers).ok_or(ApiError::AuthenticationRequired)?;
    let same: bool = subtle::ConstantTimeEq::ct_eq(presented.as_bytes(), c.secret.as_bytes()).into();
    if !same {
        return Err(ApiError::InvalidToken { reason: "not this server's development control secret" });
    }
    let request: ControlRequest =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidRequest(format!("development control: {e}")))?;
    let o = &config.oauth;
    match request {
        ControlRequest::Token { subject, tenant, scopes, ttl_seconds } => {
            check_ttl(ttl_seconds).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
            let token = mint(&c.state, &subject, &tenant, &scopes, ttl_seconds)
                .await
                .map_err(|e| e.downcast::<ApiError>().unwrap_or_else(|e| ApiError::InvalidRequest(e.to_string())))?;
            Ok(ControlAnswer { secret: Some(token), policy: None })
        }
        ControlRequest::Session { subject, tenant } => {
            let id = LinkIdentity { issuer: &o.issuer, tenant: &tenant, provider: &o.provider, subject: &subject };
            let session = c.state.services.accounts.dev_session(&id).await?;
            Ok(ControlAnswer { secret: Some(session.expose().to_owned()), policy: None })
        }
        ControlRequest::Policy { subject, provider, rooms_locked, developer, guest, denied_capabilities } => {
            let provider = provider.unwrap_or_else(|| o.provider.clone());
            let change = PolicyChange { rooms_locked, developer, guest, denied_capabilities };
            let policy = c.state.services.accounts.set_policy(&provider, &subject, &change).await?;
            let policy = serde_json::to_value(policy).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
            Ok(ControlAnswer { secret: None, policy: Some(policy) })
        }
    }
}

/// The token lifetime `helix dev-token` accepts.
pub fn check_ttl(ttl: i64) -> anyhow::Result<()> {
    if !(60..=7 * 24 * 3600).contains(&ttl) {
        bail!("--ttl-seconds must be 60-604800");
    }
    Ok(())
}

/// The command's side: asks the server running on `data_dir`, if one is. `Ok(None)` when
/// none is (no control file, or nothing answers at its address): the caller opens the
/// store itself. A server that answers with an error is an error (never a silent fallback).
pub async fn ask(data_dir: &Path, request: &ControlRequest) -> anyhow::Result<Option<ControlAnswer>> {
    let path = data_dir.join(CONTROL_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let file: ControlFile = serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    let url = reqwest::Url::parse(&file.base_url).with_context(|| format!("{}: base_url", path.display()))?;
    // Loopback only: the secret never leaves this machine.
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    let loopback = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if url.scheme() != "http" || !loopback {
        bail!("{}: the development server must be on a loopback address", path.display());
    }
    let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build()?;
    let sent = client.post(url.join(CONTROL_PATH)?).bearer_auth(&file.secret).json(request).send().await;
    let res = match sent {
        Ok(res) => res,
        // A stale file: the server is gone.
        Err(e) if e.is_connect() => return Ok(None),
        Err(e) => return Err(e).context("asking the running helix serve"),
    };
    let status = res.status();
    let body: serde_json::Value = res.json().await.context("the running helix serve's answer")?;
    if !status.is_success() {
        let code = body["error"]["code"].as_str().unwrap_or("error");
        let message = body["error"]["message"].as_str().unwrap_or("");
        bail!("the running helix serve refused: {status} {code}: {message}");
    }
    Ok(Some(serde_json::from_value(body).context("the running helix serve's answer")?))
}

/// Links the principal through the trusted path, then mints its token.
pub(crate) async fn mint(
    state: &AppState,
    subject: &str,
    tenant: &str,
    scopes: &[String],
    ttl: i64,
) -> anyhow::Result<String> {
    let config = &state.services.config;
    let secret: &Secret = config.oauth.local_hs256_secret.as_ref().context("the local HS256 path is not enabled")?;
    let (issuer, audience) = (&config.oauth.issuer, &config.oauth.audience);
    let id = LinkIdentity { issuer, tenant, provider: &config.oauth.provider, subject };
    let (_, status) = state.services.accounts.link_account(&id).await?;
    if status == helix_core::service::accounts::BindingStatus::Revoked {
        eprintln!("warning: the agent binding for this principal is revoked; the token will be refused");
    }
    Ok(helix_core::auth::jwt::mint_local_hs256(secret, issuer, audience, subject, tenant, scopes, ttl))
}
