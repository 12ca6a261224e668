//! Client ID Metadata Documents at the development issuer: a `client_id` that is a URL
//! names the client's own metadata document, fetched from there instead of a
//! registration. Only `https`, or `http` on a loopback host; no redirects followed; at most
//! [`MAX_DOCUMENT_BYTES`] within [`FETCH_TIMEOUT`]; the document's `client_id` must be the
//! URL, and the rest is checked as a registration is (`dev_register::client_of`). Kept as
//! long as its HTTP cache headers allow (at most [`MAX_CACHE_SECS`], [`MAX_CACHED`] documents).
//! Every failure refuses the client; nothing is stored.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use http_cache_semantics::CachePolicy;
use serde_json::Value;

use super::dev_register::client_of;
use crate::service::oauth::OAuthClient;

/// The largest document read.
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// One fetch, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a document is kept, whatever its headers say.
pub const MAX_CACHE_SECS: u64 = 24 * 3600;
/// Documents kept at once; a full cache drops its expired entries, then everything.
pub const MAX_CACHED: usize = 256;
/// Fetches at once; more are refused rather than queued.
const MAX_FETCHES: usize = 4;
const MAX_URL_CHARS: usize = 512;

/// Why a metadata-document client was refused (its `Display` is the error description).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CimdError {
    #[error(
        "client_id is not a usable metadata document URL (https, or http on a loopback host; a path; no query, fragment or userinfo)"
    )]
    Url,
    #[error("the client metadata document could not be fetched (no answer in time, not 200, or a redirect)")]
    Fetch,
    #[error("the client metadata document is larger than 5 KB")]
    TooLarge,
    #[error("the client metadata document's client_id is not its URL")]
    ClientIdMismatch,
    #[error("the client metadata document is not a valid public client: {0}")]
    Invalid(String),
    #[error("too many client metadata documents are being fetched; try again")]
    Busy,
}

/// Whether `client_id` names a metadata document (a registration's id never contains `:`).
pub fn is_metadata_url(client_id: &str) -> bool {
    client_id.contains("://")
}

/// The URL, if one this issuer fetches.
pub fn check_url(client_id: &str) -> Result<reqwest::Url, CimdError> {
    let url = reqwest::Url::parse(client_id).map_err(|_| CimdError::Url)?;
    let loopback = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    // The parser resolves `.` and `..`: the URL must be written as it resolves.
    let dots = client_id.split(['/', '?', '#']).any(|seg| seg == "." || seg == "..");
    let ok = client_id.len() <= MAX_URL_CHARS
        && scheme_ok
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && !matches!(url.path(), "" | "/")
        && !dots
        && url.as_str() == client_id;
    ok.then_some(url).ok_or(CimdError::Url)
}

/// The document as a client, or why not.
pub fn client_from_document(url: &str, body: &[u8], now: i64) -> Result<OAuthClient, CimdError> {
    let v: Value = serde_json::from_slice(body).map_err(|_| CimdError::Invalid("not a JSON object".into()))?;
    if v.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err(CimdError::ClientIdMismatch);
    }
    if v.get("client_secret").is_some() || v.get("client_secret_expires_at").is_some() {
        return Err(CimdError::Invalid("a document carries no client secret".into()));
    }
    let mut client = client_of(&v, now).map_err(|r| CimdError::Invalid(r.description))?;
    // The consent page names the document's URL with any name it gives itself: the name
    // alone is the client's word, the URL is where it was fetched.
    client.client_name = Some(match client.client_name {
        Some(name) => format!("{name} ({url})"),
        None => url.to_owned(),
    });
    client.client_id = url.to_owned();
    Ok(client)
}

/// The fetcher and its bounded cache (one per issuer).
pub struct ClientMetadata {
    http: reqwest::Client,
    cache: Mutex<HashMap<String, (OAuthClient, Instant)>>,
    fetches: tokio::sync::Semaphore,
}

impl Default for ClientMetadata {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientMetadata {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .build()
            .expect("HTTP client");
        Self { http, cache: Mutex::default(), fetches: tokio::sync::Semaphore::new(MAX_FETCHES) }
    }

    /// The client the document at `client_id` describes: cached while fresh, else fetched.
    pub async fn resolve(&self, client_id: &str, now: i64) -> Result<OAuthClient, CimdError> {
        let url = check_url(client_id)?;
        if let Some((client, until)) = self.cache.lock().expect("cache lock").get(client_id)
            && *until > Instant::now()
        {
            return Ok(client.clone());
        }
        let _permit = self.fetches.try_acquire().map_err(|_| CimdError::Busy)?;
        let (body, ttl) = self.fetch(url).await?;
        let client = client_from_document(client_id, &body, now)?;
        if !ttl.is_zero() {
            let mut cache = self.cache.lock().expect("cache lock");
            if cache.len() >= MAX_CACHED {
                let at = Instant::now();
                cache.retain(|_, (_, until)| *until > at);
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
            }
            cache.insert(client_id.to_owned(), (client.clone(), Instant::now() + ttl));
        }
        Ok(client)
    }

    /// The body (at most [`MAX_DOCUMENT_BYTES`]) and how long its headers let it be kept.
    async fn fetch(&self, url: reqwest::Url) -> Result<(Vec<u8>, Duration), CimdError> {
        let request = http::Request::get(url.as_str()).body(()).map_err(|_| CimdError::Url)?.into_parts().0;
        let mut res = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| CimdError::Fetch)?;
        if res.status() != reqwest::StatusCode::OK {
            return Err(CimdError::Fetch);
        }
        if res.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
            return Err(CimdError::TooLarge);
        }
        let mut response = http::Response::new(()).into_parts().0;
        response.status = res.status();
        response.headers = res.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(|_| CimdError::Fetch)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(CimdError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        let policy = CachePolicy::new(&request, &response);
        let ttl = if policy.is_storable() {
            policy.time_to_live(SystemTime::now()).min(Duration::from_secs(MAX_CACHE_SECS))
        } else {
            Duration::ZERO
        };
        Ok((body, ttl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_urls_with_a_path_are_fetched() {
        for ok in ["https://client.example/oauth/client.json", "http://127.0.0.1:8123/c.json", "http://localhost/c"] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://client.example/c.json",
            "https://client.example",
            "https://client.example/",
            "https://client.example/c.json?x=1",
            "https://client.example/c.json#f",
            "https://u:p@client.example/c.json",
            "https://client.example/a/../c.json",
            "https://client.example/./c.json",
            "ftp://client.example/c.json",
            "https://CLIENT.example/c.json",
            "dyn_0123",
        ] {
            assert_eq!(check_url(bad).err(), Some(CimdError::Url), "{bad}");
        }
        assert!(is_metadata_url("https://client.example/c") && !is_metadata_url("dyn_0123"));
    }

    #[test]
    fn a_document_must_name_its_own_url_and_be_a_public_loopback_client() {
        let url = "https://client.example/c.json";
        let doc = |v: Value| client_from_document(url, v.to_string().as_bytes(), 0);
        let good =
            serde_json::json!({ "client_id": url, "redirect_uris": ["http://127.0.0.1:4000/cb"], "client_name": "C" });
        let client = doc(good.clone()).unwrap();
        assert_eq!(client.client_id, url);
        assert_eq!(client.client_name.as_deref(), Some("C (https://client.example/c.json)"));
        let mut other = good.clone();
        other["client_id"] = "https://client.example/other.json".into();
        assert_eq!(doc(other).err(), Some(CimdError::ClientIdMismatch));
        for (field, value) in [
            ("client_secret", serde_json::json!("s")),
            ("token_endpoint_auth_method", serde_json::json!("client_secret_basic")),
            ("redirect_uris", serde_json::json!(["https://evil.example/cb"])),
            ("grant_types", serde_json::json!(["client_credentials"])),
        ] {
            let mut bad = good.clone();
            bad[field] = value;
            assert!(matches!(doc(bad), Err(CimdError::Invalid(_))), "{field}");
        }
        assert!(matches!(client_from_document(url, b"[]", 0), Err(CimdError::ClientIdMismatch)));
        assert!(matches!(client_from_document(url, b"not json", 0), Err(CimdError::Invalid(_))));
    }
}
