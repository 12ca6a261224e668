//! `/authorize` of the development issuer: the request is checked (client, exact
//! redirect with the loopback port relaxed, PKCE S256, `state`, `resource`, scopes) and
//! handed to the sign-in page as a sealed pending authorization (HMAC-signed, short-lived:
//! an anonymous `GET` writes nothing to the store); the person signs in on the development
//! sign-in page, which keeps it in the store, tied to that browser session, then approves
//! (possibly fewer scopes) or denies on the consent page.
//! Approving signs the browser in and allows agents for exactly that identity through the
//! account service's own grant, then hands the client a single-use code.
//!
//! Until the redirect URI is known to belong to the client, every refusal is a page;
//! afterwards it goes back to the client as `error=` with its `state`.

use askama::Template;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_SECURITY_POLICY, LOCATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::dev_auth::{AUTHORIZE_PATH, DevAuthKey, OFFLINE_ACCESS, resource_ok};
use super::dev_oidc::{LoginPage, identifier_ok, remember_identity, remembered_identity};
use super::dev_token::DevIssuer;
use crate::config::{DEV_PROVIDER_CLIENT_ID, DEV_PROVIDER_PATH};
use crate::domain::account::BrowserSecret;
use crate::domain::random_hex;
use crate::domain::scopes::all_oauth_scopes;
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::pages::{Csp, Page, SESSION_COOKIE, SameOrigin, cookie, pairs, single};
use crate::service::accounts::LinkIdentity;
use crate::service::oauth::{Grant, OAuthClient, PendingAuthorization};

/// How long a person has from `/authorize` to a decision.
pub const PENDING_TTL_SECS: i64 = 600;
/// How long an authorization code lives.
pub const CODE_TTL_SECS: i64 = 60;

/// The scopes this issuer grants.
pub(super) fn supported(scope: &str) -> bool {
    scope == OFFLINE_ACCESS || all_oauth_scopes().contains(&scope)
}

/// RFC 8252 §7.3: a loopback redirect matches its registration on everything but the port.
pub fn redirect_matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Ok(mut a), Ok(mut b)) = (reqwest::Url::parse(registered), reqwest::Url::parse(requested)) else {
        return false;
    };
    if !super::dev_register::is_loopback_redirect(registered) || !super::dev_register::is_loopback_redirect(requested) {
        return false;
    }
    let _ = (a.set_port(None), b.set_port(None));
    a == b
}

#[derive(Template)]
#[template(path = "dev_authorize_error.html")]
struct ErrorPage {
    code: &'static str,
    description: String,
}

fn error_page(code: &'static str, description: &'static str) -> Response {
    error_page_text(code, description.to_owned())
}

fn error_page_text(code: &'static str, description: String) -> Response {
    (StatusCode::BAD_REQUEST, Page(ErrorPage { code, description })).into_response()
}

fn see_other(location: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    match HeaderValue::from_str(location) {
        Ok(v) => {
            res.headers_mut().insert(LOCATION, v);
            res
        }
        Err(_) => error_page("invalid_request", "the redirect URI cannot be used"),
    }
}

/// Back to the client (a checked redirect URI) with these parameters.
fn back(redirect_uri: &str, params: &[(&str, &str)]) -> Response {
    let Ok(mut url) = reqwest::Url::parse(redirect_uri) else {
        return error_page("invalid_request", "the redirect URI cannot be used");
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    see_other(url.as_str())
}

fn refuse(redirect_uri: &str, state: Option<&str>, error: &str, description: &str) -> Response {
    let mut params = vec![("error", error), ("error_description", description)];
    if let Some(s) = state {
        params.push(("state", s));
    }
    back(redirect_uri, &params)
}

/// The pending authorization as the sign-in form carries it: sealed with a fresh nonce, so
/// no two requests share a value (the value names the pending authorization afterwards).
fn seal_pending(key: &DevAuthKey, pending: &PendingAuthorization) -> String {
    key.seal(&serde_json::to_vec(&(random_hex(16), pending)).expect("a pending authorization serializes"))
}

/// A sealed pending authorization this issuer made, not yet signed in, not expired at `now`.
fn open_pending(key: &DevAuthKey, sealed: &str, now: i64) -> Option<PendingAuthorization> {
    let (_, pending): (String, PendingAuthorization) = serde_json::from_slice(&key.open(sealed)?).ok()?;
    (pending.expires_at > now && pending.subject.is_none()).then_some(pending)
}

/// `GET /authorize`: checks the request and shows the sign-in page.
pub(super) async fn authorize(
    State(issuer): State<DevIssuer>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let state = &issuer.app;
    let q = pairs(query.as_deref().unwrap_or(""));
    // The first-party browser client signs in on its own page (no consent: it is Helix).
    if single(&q, "client_id") == Ok(Some(DEV_PROVIDER_CLIENT_ID)) && state.services.config.browser.dev_provider {
        return see_other(&format!("{DEV_PROVIDER_PATH}/authorize?{}", query.unwrap_or_default()));
    }
    let one = |name: &str| single(&q, name);
    let (Ok(client_id), Ok(redirect_uri)) = (one("client_id"), one("redirect_uri")) else {
        return error_page("invalid_request", "client_id and redirect_uri may be given once");
    };
    let Some(client_id) = client_id else { return error_page("invalid_request", "client_id is required") };
    let client = match issuer.client(client_id).await {
        Ok(Ok(c)) => c,
        Ok(Err(why)) => return error_page_text("invalid_client", why),
        Err(e) => return e.into_response(),
    };
    // A metadata document's redirect URIs are matched exactly; a registration's loopback
    // ports are relaxed (RFC 8252 §7.3).
    let exact = super::dev_client_metadata::is_metadata_url(&client.client_id);
    let matches = |reg: &String, r: &str| if exact { reg == r } else { redirect_matches(reg, r) };
    let redirect_uri = match redirect_uri {
        Some(r) if client.redirect_uris.iter().any(|reg| matches(reg, r)) => r.to_owned(),
        Some(_) => return error_page("invalid_redirect_uri", "redirect_uri is not one the client registered"),
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        None => return error_page("invalid_request", "redirect_uri is required"),
    };
    // From here on the client is told, at its own redirect URI.
    let Ok(client_state) = one("state") else {
        return refuse(&redirect_uri, None, "invalid_request", "state may be given once");
    };
    let Some(client_state) = client_state.filter(|s| !s.is_empty()) else {
        return refuse(&redirect_uri, None, "invalid_request", "state is required");
    };
    match check_request(state, &client, &q) {
        Ok((code_challenge, scopes)) => {
            let now = state.services.clock.epoch();
            let pending = PendingAuthorization {
                client_id: client.client_id.clone(),
                client_name: client.client_name.clone(),
                redirect_uri,
                state: client_state.to_owned(),
                code_challenge,
                scopes,
                resource: state.services.config.resource.clone(),
                subject: None,
                tenant: None,
                session_hash: None,
                expires_at: now + PENDING_TTL_SECS,
            };
            sign_in_page(seal_pending(&issuer.key, &pending), &headers)
        }
        Err((error, description)) => refuse(&redirect_uri, Some(client_state), error, description),
    }
}

/// The checks after the client and its redirect URI: (code challenge, requested scopes).
fn check_request(
    state: &AppState,
    client: &OAuthClient,
    q: &[(String, String)],
) -> Result<(String, Vec<String>), (&'static str, &'static str)> {
    let one = |name: &str| single(q, name).map_err(|()| ("invalid_request", "a parameter was given twice"));
    if one("response_type")? != Some("code") {
        return Err(("unsupported_response_type", "response_type must be code"));
    }
    if one("code_challenge_method")? != Some("S256") {
        return Err(("invalid_request", "PKCE is required with code_challenge_method S256 (plain is refused)"));
    }
    let challenge = one("code_challenge")?.unwrap_or_default();
    let b64url = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_');
    if challenge.len() != 43 || !challenge.bytes().all(b64url) {
        return Err(("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier"));
    }
    if !resource_ok(state, q) {
        return Err(("invalid_target", "resource must be this server's MCP resource"));
    }
    let default_scope = client.scope.clone().unwrap_or_else(|| all_oauth_scopes().join(" "));
    let scope = one("scope")?.map(str::to_owned).unwrap_or(default_scope);
    let mut scopes: Vec<String> = Vec::new();
    for s in scope.split_ascii_whitespace() {
        if !supported(s) {
            return Err(("invalid_scope", "scope names a scope this server does not support"));
        }
        if !scopes.iter().any(|x| x == s) {
            scopes.push(s.to_owned());
        }
    }
    if scopes.is_empty() {
        return Err(("invalid_scope", "no scope was requested"));
    }
    Ok((challenge.to_owned(), scopes))
}

/// The sign-in page, prefilled with the identity this browser last signed in as here.
fn sign_in_page(pending: String, headers: &HeaderMap) -> Response {
    let (subject, tenant) = remembered_identity(headers).unwrap_or_default();
    Page(LoginPage {
        action: AUTHORIZE_PATH.to_owned(),
        hidden: vec![("pending", pending)],
        subject,
        tenant,
        ask_name: false,
        button_id: "sign-in",
    })
    .into_response()
}

#[derive(Template)]
#[template(path = "dev_consent.html")]
struct ConsentPage {
    action: &'static str,
    pending: String,
    client_name: String,
    /// The client's registered name was absent: `client_name` is its id.
    unnamed: bool,
    client_id: String,
    /// Where the client runs: its redirect URI's host (and port), the place the decision goes.
    redirect_host: String,
    /// The redirect host is this computer (a loopback address).
    loopback: bool,
    subject: String,
    tenant: String,
    /// Each requested scope: (identifier, what it allows in plain words).
    scopes: Vec<(String, &'static str)>,
    offline: bool,
}

/// A requested scope in plain words (only known scopes are ever requested).
fn scope_words(scope: &str) -> &'static str {
    if scope == OFFLINE_ACCESS {
        return "Stay connected: keep access after this sign-in ends, until you revoke it.";
    }
    crate::domain::scopes::plain_words(scope).unwrap_or("An access this server does not describe.")
}

/// `POST /authorize`: the sign-in form (`subject`, `tenant`) or the decision
/// (`decision` = approve | deny, the ticked `scope`s), each naming its pending
/// authorization. Same-origin only.
pub(super) async fn decide(
    State(issuer): State<DevIssuer>,
    _: SameOrigin,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let state = &issuer.app;
    let form = pairs(std::str::from_utf8(&body).unwrap_or(""));
    let Ok(Some(pending_id)) = single(&form, "pending") else {
        return error_page("invalid_request", "the form names no pending authorization");
    };
    let pending_id = pending_id.to_owned();
    let outcome = match single(&form, "decision") {
        Ok(None) => signed_in(state, &issuer.key, &headers, &pending_id, &form).await,
        Ok(Some(decision)) => decision_taken(state, &headers, &pending_id, decision, &form).await,
        Err(()) => return error_page("invalid_request", "one decision at a time"),
    };
    outcome.unwrap_or_else(IntoResponse::into_response)
}

fn identity<'a>(state: &'a AppState, subject: &'a str, tenant: &'a str) -> LinkIdentity<'a> {
    let oauth = &state.services.config.oauth;
    LinkIdentity { issuer: &oauth.issuer, tenant, provider: &oauth.provider, subject }
}

/// The sign-in form: the sealed request is opened and, once the person signed in, kept in
/// the store under that value for the decision.
async fn signed_in(
    state: &AppState,
    key: &DevAuthKey,
    headers: &HeaderMap,
    pending_id: &str,
    form: &[(String, String)],
) -> Result<Response, ApiError> {
    let Some(mut pending) = open_pending(key, pending_id, state.services.clock.epoch()) else {
        return Ok(error_page("invalid_request", "this authorization request expired or is not one this server made"));
    };
    let (Ok(Some(subject)), Ok(Some(tenant))) = (single(form, "subject"), single(form, "tenant")) else {
        return Ok(error_page("invalid_request", "subject and tenant are required"));
    };
    if !identifier_ok(subject) || !identifier_ok(tenant) {
        return Ok(error_page("invalid_request", "subject and tenant: 1-128 of A-Z a-z 0-9 - _ . @"));
    }
    // The person signs in as the browser lane does: the account and link are made sure of,
    // and this browser gets a fresh session (which the decision must come from).
    let previous = cookie(headers, SESSION_COOKIE).and_then(|v| BrowserSecret::parse(&v));
    let token = state.services.accounts.sign_in(&identity(state, subject, tenant), previous.as_ref()).await?;
    pending.subject = Some(subject.to_owned());
    pending.tenant = Some(tenant.to_owned());
    pending.session_hash = Some(token.hash());
    state.services.oauth.keep_pending(pending_id, &pending).await?;
    let redirect = reqwest::Url::parse(&pending.redirect_uri).ok();
    let host = redirect.as_ref().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
    let page = ConsentPage {
        action: AUTHORIZE_PATH,
        pending: pending_id.to_owned(),
        client_name: pending.client_name.clone().unwrap_or_else(|| pending.client_id.clone()),
        unnamed: pending.client_name.is_none(),
        client_id: pending.client_id.clone(),
        loopback: super::dev_register::is_loopback_redirect(&pending.redirect_uri),
        redirect_host: match redirect.as_ref().and_then(reqwest::Url::port) {
            Some(port) => format!("{host}:{port}"),
            None => host,
        },
        subject: subject.to_owned(),
        tenant: tenant.to_owned(),
        scopes: pending.scopes.iter().map(|s| (s.clone(), scope_words(s))).collect(),
        offline: pending.scopes.iter().any(|s| s == OFFLINE_ACCESS),
    };
    let mut res = Page(page).into_response();
    let max_age = state.services.config.browser.session_absolute.as_secs() as i64;
    res.headers_mut()
        .append(SET_COOKIE, crate::http::pages::set_cookie(state, SESSION_COOKIE, token.expose(), "/", max_age));
    res.headers_mut().append(SET_COOKIE, remember_identity(state, subject, tenant));
    // The decision redirects to the client: the form may lead there.
    let csp = Csp::NoScript.policy(state);
    let origin = crate::config::origin_of(&pending.redirect_uri).unwrap_or_default();
    let csp = csp.replacen("form-action 'self'", &format!("form-action 'self' {origin}"), 1);
    res.headers_mut().insert(CONTENT_SECURITY_POLICY, HeaderValue::from_str(&csp).map_err(ApiError::internal)?);
    Ok(res)
}

async fn decision_taken(
    state: &AppState,
    headers: &HeaderMap,
    pending_id: &str,
    decision: &str,
    form: &[(String, String)],
) -> Result<Response, ApiError> {
    // The pending authorization must have been signed in by this very browser session.
    let session = crate::http::pages::session_of(state, headers).await?;
    let Some(pending) = state.services.oauth.pending(pending_id).await? else {
        return Ok(error_page("invalid_request", "this authorization request expired or was already decided"));
    };
    let (Some(subject), Some(tenant), Some(session_hash)) = (&pending.subject, &pending.tenant, &pending.session_hash)
    else {
        return Ok(error_page("invalid_request", "sign in first"));
    };
    let Some(session) = session.filter(|s| &s.token_hash == session_hash) else {
        return Err(ApiError::SessionRequired);
    };
    // Decided once: a second submission finds nothing.
    let Some(pending) = state.services.oauth.take_pending(pending_id).await? else {
        return Ok(error_page("invalid_request", "this authorization request was already decided"));
    };
    let redirect = pending.redirect_uri.as_str();
    let client_state = Some(pending.state.as_str());
    if decision != "approve" {
        return Ok(refuse(redirect, client_state, "access_denied", "the person denied the request"));
    }
    let ticked: Vec<&str> = form.iter().filter(|(k, _)| k == "scope").map(|(_, v)| v.as_str()).collect();
    let scopes: Vec<String> = pending.scopes.iter().filter(|s| ticked.contains(&s.as_str())).cloned().collect();
    if scopes.is_empty() {
        return Ok(refuse(redirect, client_state, "access_denied", "no scope was approved"));
    }
    // Approving allows agents for exactly this identity: the account service's grant,
    // the same one `/account/allow-agents` ends in (a no-op when already active).
    state.services.accounts.allow_agents(&session, &identity(state, subject, tenant)).await?;
    let code = random_hex(32);
    let grant = Grant {
        client_id: pending.client_id.clone(),
        redirect_uri: pending.redirect_uri.clone(),
        code_challenge: pending.code_challenge.clone(),
        scopes,
        resource: pending.resource.clone(),
        subject: subject.clone(),
        tenant: tenant.clone(),
        expires_at: state.services.clock.epoch() + CODE_TTL_SECS,
    };
    state.services.oauth.issue_code(&code, &grant).await?;
    Ok(back(redirect, &[("code", &code), ("state", &pending.state)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_redirects_match_on_everything_but_the_port() {
        let reg = "http://127.0.0.1:1234/callback/abc";
        assert!(redirect_matches(reg, reg));
        assert!(redirect_matches(reg, "http://127.0.0.1:50000/callback/abc"));
        assert!(redirect_matches("http://localhost/cb", "http://localhost:8080/cb"));
        assert!(!redirect_matches(reg, "http://127.0.0.1:1234/callback/other"));
        assert!(!redirect_matches(reg, "http://localhost:1234/callback/abc"));
        assert!(!redirect_matches(reg, "http://127.0.0.1:1234/callback/abc?x=1"));
    }

    #[test]
    fn repeated_parameters_must_agree() {
        let q = pairs("resource=a&resource=a&scope=x+y&state=s%20t");
        assert_eq!(single(&q, "resource"), Ok(Some("a")));
        assert_eq!(single(&q, "scope"), Ok(Some("x y")));
        assert_eq!(single(&q, "state"), Ok(Some("s t")));
        assert_eq!(single(&pairs("resource=a&resource=b"), "resource"), Err(()));
        assert_eq!(single(&q, "missing"), Ok(None));
    }

    fn pending(expires_at: i64) -> PendingAuthorization {
        PendingAuthorization {
            client_id: "dyn_1".into(),
            client_name: None,
            redirect_uri: "http://127.0.0.1:1/cb".into(),
            state: "s".into(),
            code_challenge: "c".repeat(43),
            scopes: vec!["helix.agent_runs.read".into()],
            resource: "http://127.0.0.1:9000/mcp".into(),
            subject: None,
            tenant: None,
            session_hash: None,
            expires_at,
        }
    }

    #[test]
    fn a_sealed_request_opens_until_it_expires_and_each_seal_is_unique() {
        let key = DevAuthKey::from_pkcs8(&DevAuthKey::generate_pkcs8()).unwrap();
        let p = pending(1_000);
        let (a, b) = (seal_pending(&key, &p), seal_pending(&key, &p));
        assert_ne!(a, b, "a fresh nonce in each");
        assert_eq!(open_pending(&key, &a, 999), Some(p.clone()));
        assert_eq!(open_pending(&key, &a, 1_000), None, "expired");
        let mut signed_in = p;
        signed_in.subject = Some("alice".into());
        assert_eq!(open_pending(&key, &seal_pending(&key, &signed_in), 0), None, "only a request not yet signed in");
        let other = DevAuthKey::from_pkcs8(&DevAuthKey::generate_pkcs8()).unwrap();
        assert_eq!(open_pending(&other, &a, 0), None);
    }
}
