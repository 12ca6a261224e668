//! The harness's one HTTP client: the configured base URL only, the bearer only in the
//! `Authorization` header, no redirects, no environment proxies, one connection per
//! request (so a lost response never leaves a half-used pooled connection behind), and
//! every request bounded by the per-request timeout and the phase's deadline.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::config::Config;

/// What came back: an HTTP answer, or why none did.
#[derive(Debug, Clone)]
pub enum Reply {
    Answer {
        status: u16,
        replayed: Option<bool>,
        body: Value,
    },
    /// No answer (connect failure, reset, closed before the response, timeout).
    Transport(&'static str),
    /// The phase's deadline passed before an answer (or before the request was sent).
    Deadline,
}

impl Reply {
    pub fn status(&self) -> Option<u16> {
        match self {
            Reply::Answer { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error code of a `helix.agent_api.error.v1` body.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Reply::Answer { body, .. } => body.pointer("/error/code").and_then(Value::as_str),
            _ => None,
        }
    }

    pub fn body(&self) -> &Value {
        match self {
            Reply::Answer { body, .. } => body,
            _ => &Value::Null,
        }
    }

    /// Worth one retry of the exact same request: no answer, a 5xx, a 429, or a live
    /// reservation / claim that will clear.
    pub fn transient(&self) -> bool {
        match self {
            Reply::Transport(_) => true,
            Reply::Deadline => false,
            Reply::Answer { status, .. } => {
                *status >= 500
                    || *status == 429
                    || matches!(self.error_code(), Some("idempotency_in_progress" | "run_busy"))
            }
        }
    }

    /// One short description for the report (never a body, never a header).
    pub fn describe(&self) -> String {
        match self {
            Reply::Answer { status, .. } => match self.error_code() {
                Some(code) => format!("HTTP {status} {code}"),
                None => format!("HTTP {status}"),
            },
            Reply::Transport(why) => format!("no response ({why})"),
            Reply::Deadline => "the phase deadline passed".into(),
        }
    }
}

pub struct Http {
    client: reqwest::Client,
    base: reqwest::Url,
    token: String,
    request_timeout: Duration,
}

/// One request: method, path (with query), optional `Idempotency-Key`, optional JSON body.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: reqwest::Method,
    pub path: String,
    pub key: Option<String>,
    pub body: Option<Value>,
}

impl Req {
    pub fn get(path: impl Into<String>) -> Self {
        Self { method: reqwest::Method::GET, path: path.into(), key: None, body: None }
    }
    pub fn delete(path: impl Into<String>) -> Self {
        Self { method: reqwest::Method::DELETE, path: path.into(), key: None, body: None }
    }
    pub fn post(path: impl Into<String>, key: Option<&str>, body: Value) -> Self {
        Self { method: reqwest::Method::POST, path: path.into(), key: key.map(str::to_owned), body: Some(body) }
    }
}

impl Http {
    pub fn new(c: &Config, token: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_max_idle_per_host(0)
            .https_only(!c.loopback_http)
            .user_agent(concat!("helix-room-acceptance/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { client, base: c.base_url.clone(), token: token.to_owned(), request_timeout: c.request_timeout })
    }

    pub async fn send(&self, req: &Req, deadline: Instant) -> Reply {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Reply::Deadline;
        }
        let Ok(url) = self.base.join(&req.path) else { return Reply::Transport("bad path") };
        // A timeout cut short by the phase deadline is the deadline, not a transient failure.
        let clamped = left < self.request_timeout;
        let timed_out = |e: reqwest::Error| match (e.is_timeout(), clamped) {
            (true, true) => Reply::Deadline,
            (true, false) => Reply::Transport("timeout"),
            (false, _) => Reply::Transport("connection"),
        };
        let mut b = self
            .client
            .request(req.method.clone(), url)
            .bearer_auth(&self.token)
            .timeout(self.request_timeout.min(left));
        if let Some(k) = &req.key {
            b = b.header("Idempotency-Key", k);
        }
        if let Some(body) = &req.body {
            b = b.json(body);
        }
        let res = match b.send().await {
            Ok(r) => r,
            Err(e) => return timed_out(e),
        };
        let status = res.status().as_u16();
        let replayed = res.headers().get("idempotency-replayed").and_then(|v| v.to_str().ok()).map(|v| v == "true");
        match res.bytes().await {
            Ok(bytes) => {
                Reply::Answer { status, replayed, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
            }
            Err(e) => timed_out(e),
        }
    }

    /// The request, and once more (the exact same request, the same key) when the first
    /// reply was transient. Returns the last reply and how many were sent.
    pub async fn send_retrying_once(&self, req: &Req, deadline: Instant) -> (Reply, u32) {
        let first = self.send(req, deadline).await;
        if !first.transient() {
            return (first, 1);
        }
        let pause = Duration::from_millis(250).min(deadline.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
        (self.send(req, deadline).await, 2)
    }
}
