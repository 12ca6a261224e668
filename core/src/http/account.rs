//! The cookie lane and the pages people use: sign-in through OpenID Connect (the trusted
//! provider adapter), the `helix_session` cookie, agent-binding management, `/account`
//! and `/agent-access`. This lane never reads `Authorization`; the bearer lanes never
//! read the cookie. Every cookie mutation is same-origin only (no CORS here).

use askama::Template;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Form, Json, Router};
use http::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;

use super::{AppState, Group, pipeline};
use crate::domain::account::{BrowserSecret, IntentPurpose, intent_nonce, intent_verifier};
use crate::domain::random_hex;
use crate::domain::scopes::all_oauth_scopes;
use crate::error::ApiError;
use crate::service::accounts::{BindingList, LinkIdentity};
use crate::service::sessions::Session;

pub const SESSION_COOKIE: &str = "helix_session";
pub const SIGNIN_COOKIE: &str = "helix_signin";
pub const CALLBACK_PATH: &str = "/account/callback";
/// How long after the intent a step-up's provider authentication may be (clock skew).
const STEP_UP_SKEW_SECS: i64 = 60;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/agent-access", get(agent_access_page))
        .route("/agent-access.json", get(agent_access_manifest))
        .route("/account", get(account_page))
        .route("/account/static/account.css", get(stylesheet))
        .route("/account/sign-in", post(sign_in))
        .route(CALLBACK_PATH, get(callback_page))
        .route("/account/sign-out", post(sign_out))
        .route("/account/allow-agents", post(allow_agents))
        .route("/account/agent-bindings/revoke", post(revoke_form))
        .route("/api/account/session/agent-bindings", get(list_bindings))
        .route("/api/account/session/agent-bindings/{binding_ref}", delete(revoke))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        // Outside the pipeline, so error answers (rendered by it) carry them too.
        .layer(axum::middleware::map_response_with_state(state.clone(), page_headers))
        .with_state(state)
}

/// The strict policy of every response of this lane: no script at all, styles and
/// forms from this origin (forms may also lead to the configured provider).
pub fn content_security_policy(state: &AppState) -> String {
    let provider = state
        .services
        .config
        .browser
        .oidc
        .as_ref()
        .and_then(|o| crate::config::origin_of(&o.issuer))
        .map(|o| format!(" {o}"))
        .unwrap_or_default();
    format!(
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'{provider}; \
         frame-ancestors 'none'; base-uri 'none'"
    )
}

async fn page_headers(State(state): State<AppState>, res: Response) -> Response {
    page_headers_for(State(state), res).await
}

/// The page security headers (also used by the development provider's pages).
pub async fn page_headers_for(State(state): State<AppState>, mut res: Response) -> Response {
    let csp = content_security_policy(&state);
    let h = res.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_str(&csp).expect("ascii policy"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    res
}

// ---------------------------------------------------------------------------------------------
// Cookies and the same-origin rule

/// The single value of a cookie, or None when absent or sent more than once (fail closed).
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut found: Option<String> = None;
    for header in headers.get_all(COOKIE) {
        let Ok(text) = header.to_str() else { return None };
        for pair in text.split(';') {
            let Some((k, v)) = pair.trim().split_once('=') else { continue };
            if k == name {
                if found.is_some() {
                    return None;
                }
                found = Some(v.trim().to_owned());
            }
        }
    }
    found
}

fn set_cookie(state: &AppState, name: &str, value: &str, path: &str, max_age: i64) -> HeaderValue {
    let secure = if state.services.config.browser.secure_cookies { "; Secure" } else { "" };
    HeaderValue::from_str(&format!("{name}={value}; Path={path}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"))
        .expect("cookie values are hex")
}

fn clear_cookie(state: &AppState, name: &str, path: &str) -> HeaderValue {
    set_cookie(state, name, "", path, 0)
}

/// A cookie mutation must come from the public origin: `Origin` when the browser sends
/// it, else `Sec-Fetch-Site: same-origin`; with neither, it is refused.
pub fn require_same_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let public = &state.services.config.browser.public_origin;
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().map_err(|_| ApiError::CrossSiteRequest)?;
        return if origin.eq_ignore_ascii_case(public) { Ok(()) } else { Err(ApiError::CrossSiteRequest) };
    }
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some("same-origin") => Ok(()),
        _ => Err(ApiError::CrossSiteRequest),
    }
}

/// The session of the request's `helix_session` cookie, if live.
pub(crate) async fn session_of(state: &AppState, headers: &HeaderMap) -> Result<Option<Session>, ApiError> {
    let Some(token) = cookie(headers, SESSION_COOKIE).and_then(|v| BrowserSecret::parse(&v)) else {
        return Ok(None);
    };
    state.services.resolve_session(&token).await
}

/// A signed-in browser (any account, guests included; handlers decide about guests).
pub struct BrowserSession(pub Session);

impl FromRequestParts<AppState> for BrowserSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        session_of(state, &parts.headers).await?.map(BrowserSession).ok_or(ApiError::SessionRequired)
    }
}

fn redirect(to: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    res.headers_mut().insert(LOCATION, HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/account")));
    res
}

fn html(body: Result<String, askama::Error>) -> Result<Response, ApiError> {
    let body = body.map_err(ApiError::internal)?;
    let mut res = body.into_response();
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    Ok(res)
}

// ---------------------------------------------------------------------------------------------
// Sign-in, callback, sign-out, allow agents

/// Starts an intent: browser secret cookie, hashed intent item, redirect to the provider.
async fn start_intent(
    state: &AppState,
    purpose: IntentPurpose,
    session: Option<&Session>,
) -> Result<Response, ApiError> {
    let oidc = state.oidc.as_ref().ok_or(ApiError::SignInUnavailable)?;
    let browser = BrowserSecret::generate();
    let intent_state = random_hex(32);
    state.services.create_intent(&intent_state, &browser, purpose, session).await?;
    let url = oidc
        .authorize_url(
            &intent_state,
            &intent_nonce(&browser, &intent_state),
            &intent_verifier(&browser, &intent_state),
            purpose == IntentPurpose::AllowAgents,
        )
        .await?;
    let mut res = redirect(&url);
    let ttl = crate::service::sessions::INTENT_TTL_SECS;
    res.headers_mut().append(SET_COOKIE, set_cookie(state, SIGNIN_COOKIE, browser.expose(), CALLBACK_PATH, ttl));
    Ok(res)
}

async fn sign_in(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    require_same_origin(&state, &headers)?;
    start_intent(&state, IntentPurpose::SignIn, None).await
}

async fn allow_agents(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
) -> Result<Response, ApiError> {
    require_same_origin(&state, &headers)?;
    session.require_member()?;
    start_intent(&state, IntentPurpose::AllowAgents, Some(&session)).await
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// The trusted provider adapter: the only path from a verified identity to an account.
#[derive(Template)]
#[template(path = "sign_in_failed.html")]
struct SignInFailedPage {
    code: &'static str,
    reason: &'static str,
}

/// The callback as a browser sees it: a refused sign-in (4xx) is a page with the same
/// status, code and reason as the JSON error when the request accepts HTML. Everything
/// else, 5xx included (the pipeline logs their cause), is the JSON error.
async fn callback_page(state: State<AppState>, headers: HeaderMap, q: Query<CallbackQuery>) -> Response {
    let wants_html =
        headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    match callback(state, headers, q).await {
        Ok(res) => res,
        Err(e) if wants_html && e.status().is_client_error() => {
            let reason = match &e {
                ApiError::SignInFailed { reason } => reason,
                _ => "",
            };
            let status = e.status();
            match html(SignInFailedPage { code: e.code(), reason }.render()) {
                Ok(mut res) => {
                    *res.status_mut() = status;
                    res
                }
                Err(e) => e.into_response(),
            }
        }
        Err(e) => e.into_response(),
    }
}

async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, ApiError> {
    let oidc = state.oidc.as_ref().ok_or(ApiError::SignInUnavailable)?;
    let browser = cookie(&headers, SIGNIN_COOKIE)
        .and_then(|v| BrowserSecret::parse(&v))
        .ok_or(ApiError::SignInFailed { reason: "state" })?;
    let intent_state = q.state.filter(|s| !s.is_empty()).ok_or(ApiError::SignInFailed { reason: "state" })?;
    // Consumed first: whatever happens next, this state cannot be used again.
    let intent = state.services.consume_intent(&intent_state, &browser).await?;
    if q.error.is_some() {
        return Err(ApiError::SignInFailed { reason: "provider_error" });
    }
    let code = q.code.filter(|c| !c.is_empty()).ok_or(ApiError::SignInFailed { reason: "code" })?;
    let verified = oidc
        .complete(
            &code,
            &intent_nonce(&browser, &intent_state),
            &intent_verifier(&browser, &intent_state),
            state.services.clock.now(),
        )
        .await?;
    let oauth = &state.services.config.oauth;
    // The agent identity this browser identity stands for: the same authorization server
    // (production checks the issuers are equal; the development provider stands in for
    // the local issuer), the configured provider alias, the verified subject and tenant.
    let id = LinkIdentity {
        issuer: &oauth.issuer,
        tenant: &verified.tenant,
        provider: &oauth.provider,
        subject: &verified.subject,
    };
    let mut res = redirect("/account");
    let h = res.headers_mut();
    h.append(SET_COOKIE, clear_cookie(&state, SIGNIN_COOKIE, CALLBACK_PATH));
    match intent.purpose {
        IntentPurpose::SignIn => {
            let previous = cookie(&headers, SESSION_COOKIE).and_then(|v| BrowserSecret::parse(&v));
            let token = state.services.sign_in(&id, previous.as_ref()).await?;
            let max_age = state.services.config.browser.session_absolute.as_secs() as i64;
            res.headers_mut().append(SET_COOKIE, set_cookie(&state, SESSION_COOKIE, token.expose(), "/", max_age));
        }
        IntentPurpose::AllowAgents => {
            let fresh = verified.auth_time.is_some_and(|t| t >= intent.created_at - STEP_UP_SKEW_SECS);
            if !fresh {
                return Err(ApiError::SignInFailed { reason: "step_up" });
            }
            let current = session_of(&state, &headers).await?.ok_or(ApiError::SessionRequired)?;
            if intent.session_hash.as_deref() != Some(current.token_hash.as_str()) {
                return Err(ApiError::SessionRequired);
            }
            state.services.allow_agents(&current, &id).await?;
        }
    }
    Ok(res)
}

async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    require_same_origin(&state, &headers)?;
    if let Some(token) = cookie(&headers, SESSION_COOKIE).and_then(|v| BrowserSecret::parse(&v)) {
        state.services.sign_out(&token).await?;
    }
    let mut res = redirect("/account");
    res.headers_mut().append(SET_COOKIE, clear_cookie(&state, SESSION_COOKIE, "/"));
    Ok(res)
}

// ---------------------------------------------------------------------------------------------
// Agent bindings

async fn list_bindings(
    State(state): State<AppState>,
    BrowserSession(session): BrowserSession,
) -> Result<Json<BindingList>, ApiError> {
    Ok(Json(state.services.list_bindings(&session).await?))
}

async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    Path(binding_ref): Path<String>,
    query: axum::extract::RawQuery,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    require_same_origin(&state, &headers)?;
    // Only the opaque reference in the path: no query or body is admitted.
    if query.0.is_some_and(|q| !q.is_empty()) || !body.is_empty() {
        return Err(ApiError::InvalidRequest("the request takes no query or body".into()));
    }
    Ok(Json(state.services.revoke_binding_ref(&session, &binding_ref).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeForm {
    binding_ref: String,
}

async fn revoke_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    Form(form): Form<RevokeForm>,
) -> Result<Response, ApiError> {
    require_same_origin(&state, &headers)?;
    state.services.revoke_binding_ref(&session, &form.binding_ref).await?;
    Ok(redirect("/account"))
}

// ---------------------------------------------------------------------------------------------
// Pages

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    signed_in: bool,
    sign_in_available: bool,
    guest: bool,
    account_ref: String,
    bindings: Option<BindingList>,
}

async fn account_page(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let session = session_of(&state, &headers).await?;
    let page = match &session {
        None => AccountPage {
            signed_in: false,
            sign_in_available: state.oidc.is_some(),
            guest: false,
            account_ref: String::new(),
            bindings: None,
        },
        Some(s) => AccountPage {
            signed_in: true,
            sign_in_available: state.oidc.is_some(),
            guest: s.policy.guest,
            account_ref: s.account_ref(),
            bindings: if s.policy.guest { None } else { Some(state.services.list_bindings(s).await?) },
        },
    };
    html(page.render())
}

/// One client's copy-paste setup.
pub struct ClientSetup {
    pub id: &'static str,
    pub name: &'static str,
    pub steps: String,
}

fn client_setups(resource: &str) -> Vec<ClientSetup> {
    vec![
        ClientSetup {
            id: "codex",
            name: "Codex",
            steps: format!(
                "# ~/.codex/config.toml\n[mcp_servers.helix]\nurl = \"{resource}\"\n\n# then sign in:\ncodex mcp login helix"
            ),
        },
        ClientSetup {
            id: "claude-code",
            name: "Claude Code",
            steps: format!(
                "claude mcp add --transport http helix {resource}\n# then run /mcp in Claude Code and choose Authenticate"
            ),
        },
        ClientSetup {
            id: "openai-responses",
            name: "OpenAI Responses API",
            steps: format!(
                "{{\n  \"model\": \"gpt-5\",\n  \"tools\": [{{\n    \"type\": \"mcp\",\n    \"server_label\": \"helix\",\n    \
                 \"server_url\": \"{resource}\",\n    \"authorization\": \"$HELIX_ACCESS_TOKEN\",\n    \
                 \"require_approval\": \"never\"\n  }}],\n  \"input\": \"Start a Helix run about ...\"\n}}"
            ),
        },
        ClientSetup {
            id: "gemini",
            name: "Gemini CLI",
            steps: format!(
                "// ~/.gemini/settings.json\n{{\n  \"mcpServers\": {{\n    \"helix\": {{ \"httpUrl\": \"{resource}\" }}\n  }}\n}}\n// then: /mcp auth helix"
            ),
        },
    ]
}

#[derive(Template)]
#[template(path = "agent_access.html")]
struct AgentAccessPage {
    resource: String,
    rest_base: String,
    metadata_url: String,
    authorization_servers: Vec<String>,
    scopes: Vec<&'static str>,
    clients: Vec<ClientSetup>,
}

fn resource_of(state: &AppState) -> String {
    let meta = super::discovery::metadata(state, all_oauth_scopes());
    meta["resource"].as_str().unwrap_or_default().to_owned()
}

async fn agent_access_page(State(state): State<AppState>) -> Result<Response, ApiError> {
    let config = &state.services.config;
    let resource = resource_of(&state);
    html(
        AgentAccessPage {
            clients: client_setups(&resource),
            resource,
            rest_base: format!("{}/api/v1/agent-runs", config.public_base_url),
            metadata_url: super::resource_metadata_url(&config.public_base_url, Group::Mcp),
            authorization_servers: config.oauth.authorization_servers.clone(),
            scopes: all_oauth_scopes(),
        }
        .render(),
    )
}

async fn agent_access_manifest(State(state): State<AppState>) -> Json<serde_json::Value> {
    let config = &state.services.config;
    let resource = resource_of(&state);
    let clients: serde_json::Map<String, serde_json::Value> = client_setups(&resource)
        .into_iter()
        .map(|c| (c.id.to_owned(), serde_json::json!({ "name": c.name, "setup": c.steps })))
        .collect();
    Json(serde_json::json!({
        "schema": "helix.agent_access.v1",
        "resource": resource,
        "mcp_url": resource,
        "rest_base_url": format!("{}/api/v1/agent-runs", config.public_base_url),
        "protected_resource_metadata": super::resource_metadata_url(&config.public_base_url, Group::Mcp),
        "authorization_servers": config.oauth.authorization_servers,
        "scopes_supported": all_oauth_scopes(),
        "account_page": format!("{}/account", config.public_base_url),
        "clients": clients,
    }))
}

const STYLESHEET: &str = include_str!("../../templates/account.css");

async fn stylesheet() -> Response {
    let mut res = STYLESHEET.into_response();
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_cookie_sent_twice_counts_as_absent() {
        assert_eq!(cookie(&headers(&[("cookie", "a=1; helix_session=x")]), "helix_session").as_deref(), Some("x"));
        assert_eq!(cookie(&headers(&[("cookie", "helix_session=x; helix_session=y")]), "helix_session"), None);
        assert_eq!(
            cookie(&headers(&[("cookie", "helix_session=x"), ("cookie", "helix_session=x")]), "helix_session"),
            None
        );
        assert_eq!(cookie(&headers(&[("cookie", "other=1")]), "helix_session"), None);
    }
}
