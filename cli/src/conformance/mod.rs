//! `helix conformance`: the provider conformance probe. It checks a deployment the way an
//! MCP client and a provider see it and prints one typed, credential-redacted report
//! (`casimirbot.mcp_provider_conformance.v1`); the exit status is non-zero when any check
//! that ran failed. Everything is configured by environment variables (see `settings`).
//!
//! - always: the public Agent Access manifest, the protected-resource metadata and the
//!   unauthenticated MCP challenge (`public`);
//! - with `CASIMIRBOT_MCP_ACCESS_TOKEN`: authenticated `initialize` and `tools/list` (`mcp`);
//! - with `OPENAI_API_KEY` / `GEMINI_API_KEY`: one one-tool provider invocation each
//!   (`providers`), each creating at most one one-step, 60-second run, never continued.

mod mcp;
mod providers;
mod public;
pub mod report;
pub mod settings;

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, StatusCode};
use serde_json::Value;

use report::{Check, Report};
use settings::Settings;

/// Runs the probe against the environment's configuration; prints the report on stdout.
/// Returns whether every check that ran passed.
pub async fn run() -> bool {
    let lookup = |name: &str| std::env::var(name).ok();
    let report = probe(&lookup).await;
    let secrets = Settings::secrets(&lookup);
    let json = report.to_redacted_json(&secrets);
    println!("{}", serde_json::to_string_pretty(&json).expect("JSON prints"));
    report.passed
}

/// The whole probe over a variable lookup. A refused target is one failed check and no
/// request at all.
pub async fn probe(lookup: &dyn Fn(&str) -> Option<String>) -> Report {
    // As given, unless it might carry credentials of its own (a refused `user:pass@` URL).
    let target = lookup(settings::BASE_URL).unwrap_or_default();
    let target = if target.contains('@') { report::REDACTED.to_owned() } else { target };
    let settings = match Settings::from_lookup(lookup) {
        Ok(s) => s,
        Err(reason) => {
            let refused = Check::fail("target", format!("refused, no request sent: {reason}"));
            return Report::new(target, vec![refused]);
        }
    };
    let http = match Http::new() {
        Ok(h) => h,
        Err(e) => return Report::new(target, vec![Check::fail("target", e)]),
    };
    let mut checks = vec![Check::pass("target", "https, or loopback http with the explicit opt-in")];
    checks.extend(public::checks(&http, &settings).await);
    let catalog = mcp::checks(&http, &settings, &mut checks).await;
    checks.push(providers::openai(&http, &settings).await);
    checks.push(providers::gemini(&http, &settings, catalog.as_ref()).await);
    Report::new(settings.base.clone(), checks)
}

/// One HTTP response, read whole (bounded).
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_str(&self.body).map_err(|_| format!("HTTP {}: the body is not JSON", self.status.as_u16()))
    }

    /// The JSON body of a 2xx answer, else why not.
    pub fn ok_json(&self) -> Result<Value, String> {
        if !self.status.is_success() {
            return Err(format!("HTTP {}: {}", self.status.as_u16(), excerpt(&self.body)));
        }
        self.json()
    }
}

const MAX_BODY_BYTES: usize = 4 << 20;

/// The probe's HTTP client: no redirects (a bearer never follows one, and an https target
/// cannot bounce the probe to plain http), bounded time and body size.
pub struct Http {
    client: reqwest::Client,
}

impl Http {
    fn new() -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .user_agent(concat!("helix-conformance/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|_| "could not build the HTTP client".to_owned())?;
        Ok(Http { client })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub async fn send(&self, request: RequestBuilder) -> Result<Reply, String> {
        let mut res = request.send().await.map_err(transport_error)?;
        let status = res.status();
        let headers = res.headers().clone();
        let mut bytes = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(transport_error)? {
            if bytes.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(format!("HTTP {}: the body is larger than {MAX_BODY_BYTES} bytes", status.as_u16()));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() })
    }
}

/// A transport failure in words, without the request (no header or body is echoed).
fn transport_error(e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "the request failed"
    };
    match e.url() {
        Some(url) => format!("{kind}: {}", url.as_str()),
        None => kind.to_owned(),
    }
}

/// The first 200 characters of a body, for a reason line (redaction still applies).
pub fn excerpt(body: &str) -> String {
    let mut s: String = body.chars().take(200).collect();
    if s.len() < body.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_target_is_one_failed_check_and_never_echoes_url_credentials() {
        let lookup = |name: &str| (name == settings::BASE_URL).then(|| "https://user:hunter2@example.com".to_owned());
        let report = probe(&lookup).await;
        assert!(!report.passed);
        assert_eq!(report.checks.len(), 1);
        assert_eq!((report.checks[0].name, report.checks[0].status), ("target", report::Status::Fail));
        assert!(!serde_json::to_string(&report.to_redacted_json(&[])).unwrap().contains("hunter2"));
    }
}
