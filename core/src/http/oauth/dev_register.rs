//! RFC 7591 dynamic registration at the development issuer: public clients
//! (`token_endpoint_auth_method: "none"`) with loopback redirect URIs only, kept in the
//! store for [`CLIENT_TTL_SECS`] and at most [`MAX_REGISTRATIONS_PER_HOUR`] an hour.
//! Unknown metadata is ignored, as RFC 7591 §2 asks; known metadata is checked.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

use crate::domain::random_hex;
use crate::domain::scopes::all_oauth_scopes;
use crate::http::AppState;
use crate::service::oauth::{OAuthClient, Registration};

/// How long a registration lives.
pub const CLIENT_TTL_SECS: i64 = 30 * 24 * 3600;
/// Registrations accepted in one clock hour, over all callers.
pub const MAX_REGISTRATIONS_PER_HOUR: i64 = 100;
const MAX_REDIRECT_URIS: usize = 8;
const MAX_URI_CHARS: usize = 512;
const MAX_NAME_CHARS: usize = 128;

/// An RFC 7591 error: answered 400 `{"error", "error_description"}`.
pub(super) struct Refusal {
    code: &'static str,
    pub(super) description: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.code, "error_description": self.description });
        (StatusCode::BAD_REQUEST, Json(body)).into_response()
    }
}

fn refuse(code: &'static str, description: &str) -> Refusal {
    Refusal { code, description: description.to_owned() }
}

fn metadata_error(description: &str) -> Refusal {
    refuse("invalid_client_metadata", description)
}

/// A loopback redirect URI (RFC 8252 §7.3): `http`, host `127.0.0.1`, `localhost` or
/// `[::1]`, any port and path, no userinfo or fragment.
pub fn is_loopback_redirect(uri: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(uri) else { return false };
    let host_ok = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    uri.len() <= MAX_URI_CHARS
        && url.scheme() == "http"
        && host_ok
        && url.username().is_empty()
        && url.password().is_none()
        && url.fragment().is_none()
}

fn strings<'a>(v: &'a Value, field: &str) -> Result<Option<Vec<&'a str>>, Refusal> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().ok_or_else(|| metadata_error(&format!("{field} must be an array of strings"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(metadata_error(&format!("{field} must be an array of strings"))),
    }
}

fn optional_str<'a>(v: &'a Value, field: &str) -> Result<Option<&'a str>, Refusal> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(metadata_error(&format!("{field} must be a string"))),
    }
}

/// The client a registration request describes, or the RFC 7591 error.
pub(super) fn client_of(v: &Value, now: i64) -> Result<OAuthClient, Refusal> {
    if !v.is_object() {
        return Err(metadata_error("the body must be a JSON object"));
    }
    let redirects = strings(v, "redirect_uris")?.unwrap_or_default();
    if redirects.is_empty() || redirects.len() > MAX_REDIRECT_URIS {
        return Err(refuse("invalid_redirect_uri", "redirect_uris: 1-8 loopback http URIs are required"));
    }
    if let Some(bad) = redirects.iter().find(|u| !is_loopback_redirect(u)) {
        let shown: String = bad.chars().take(80).collect();
        return Err(refuse(
            "invalid_redirect_uri",
            &format!("{shown:?} is not a loopback redirect URI (http://127.0.0.1, localhost or [::1], any port)"),
        ));
    }
    match optional_str(v, "token_endpoint_auth_method")? {
        None | Some("none") => {}
        Some(_) => return Err(metadata_error("only public clients are registered: token_endpoint_auth_method none")),
    }
    let grants = strings(v, "grant_types")?.unwrap_or_else(|| vec!["authorization_code"]);
    if grants.is_empty() || grants.iter().any(|g| !matches!(*g, "authorization_code" | "refresh_token")) {
        return Err(metadata_error("grant_types: authorization_code and refresh_token only"));
    }
    if strings(v, "response_types")?.is_some_and(|r| r.iter().any(|t| *t != "code")) {
        return Err(metadata_error("response_types: code only"));
    }
    let name = optional_str(v, "client_name")?;
    if name.is_some_and(|n| n.chars().count() > MAX_NAME_CHARS || n.chars().any(char::is_control)) {
        return Err(metadata_error("client_name: at most 128 printable characters"));
    }
    let scope = optional_str(v, "scope")?;
    let supported = all_oauth_scopes();
    if let Some(s) = scope
        && s.split(' ').any(|s| s != super::dev_auth::OFFLINE_ACCESS && !supported.contains(&s))
    {
        return Err(metadata_error("scope names a scope this server does not support"));
    }
    Ok(OAuthClient {
        client_id: format!("dyn_{}", random_hex(16)),
        client_name: name.map(str::to_owned),
        redirect_uris: redirects.iter().map(|s| s.to_string()).collect(),
        grant_types: grants.iter().map(|s| s.to_string()).collect(),
        scope: scope.map(str::to_owned),
        issued_at: now,
        expires_at: now + CLIENT_TTL_SECS,
    })
}

pub async fn register(State(state): State<AppState>, body: Bytes) -> Response {
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return metadata_error("the body must be a JSON object").into_response();
    };
    let now = state.services.clock.epoch();
    let client = match client_of(&v, now) {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    match state.services.oauth.register(&client, MAX_REGISTRATIONS_PER_HOUR).await {
        Ok(Registration::TooMany) => {
            return metadata_error("too many registrations this hour; try again later").into_response();
        }
        Ok(Registration::Kept) => {}
        Err(e) => return e.into_response(),
    }
    let mut out = json!({
        "client_id": client.client_id,
        "client_id_issued_at": client.issued_at,
        "redirect_uris": client.redirect_uris,
        "grant_types": client.grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(name) = &client.client_name {
        out["client_name"] = json!(name);
    }
    if let Some(scope) = &client.scope {
        out["scope"] = json!(scope);
    }
    (StatusCode::CREATED, Json(out)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_redirects_are_admitted() {
        for ok in [
            "http://127.0.0.1:49152/callback/abc",
            "http://localhost:6274/oauth/callback",
            "http://[::1]:8080/cb",
            "http://127.0.0.1/cb",
        ] {
            assert!(is_loopback_redirect(ok), "{ok}");
        }
        for bad in [
            "https://127.0.0.1:1/cb",
            "http://example.com/cb",
            "http://127.0.0.2/cb",
            "http://localhost.evil.com/cb",
            "http://user@127.0.0.1/cb",
            "http://127.0.0.1/cb#frag",
            "com.example.app:/cb",
            "not a url",
        ] {
            assert!(!is_loopback_redirect(bad), "{bad}");
        }
    }
}
