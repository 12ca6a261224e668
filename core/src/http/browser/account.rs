//! The cookie lane and the pages people use: sign-in through OpenID Connect (the trusted
//! provider adapter), the `helix_session` cookie, agent-binding management, `/account`
//! and `/agent-access`. This lane never reads `Authorization`; the bearer lanes never
//! read the cookie. Every cookie mutation is same-origin only (no CORS here).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Form, Json, Router};
use http::header::SET_COOKIE;
use http::{HeaderMap, HeaderValue};
use serde::Deserialize;

use crate::domain::account::{BrowserSecret, IntentPurpose, ReturnPath, intent_nonce, intent_verifier};
use crate::domain::clients::{ClientSetup, client_setups, data_oauth_scopes};
use crate::domain::random_hex;
use crate::domain::scopes::all_oauth_scopes;
use crate::error::ApiError;
use crate::http::pages::sign_in_first::{RETURN_TO, return_to_of_query, to_sign_in_page, with_return_to};
use crate::http::pages::{
    Asset, BrowserSession, Csp, Page, Referrer, SESSION_COOKIE, SameOrigin, SameOriginSession, cookie, page_headers,
    session_of,
};
use crate::http::pages::{CALLBACK_PATH, SIGN_IN_PAGE, pairs, see_other, set_cookie};
use crate::http::{AppState, Group, pipeline};
use crate::service::accounts::{BindingList, LinkIdentity};
use crate::service::sessions::Session;

pub const SIGNIN_COOKIE: &str = "helix_signin";
/// How long after the intent a step-up's provider authentication may be (clock skew).
const STEP_UP_SKEW_SECS: i64 = 60;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(landing_page))
        .route("/agent-access", get(agent_access_page))
        .route("/agent-access.json", get(agent_access_manifest))
        .route("/account", get(account_page))
        .route("/account/static/account.css", get(stylesheet))
        .route(crate::http::pages::REFS_SCRIPT_PATH, get(refs_script))
        .route("/account/sign-in", post(sign_in).get(sign_in_again))
        .route(CALLBACK_PATH, get(callback_page))
        .route("/account/sign-out", post(sign_out).get(to_sign_in_page))
        .route("/account/allow-agents", post(allow_agents).get(to_sign_in_page))
        .route("/account/agent-bindings/revoke", post(revoke_form).get(to_sign_in_page))
        .route("/api/account/session/agent-bindings", get(list_bindings))
        .route("/api/account/session/agent-bindings/{binding_ref}", delete(revoke))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        // Outside the pipeline, so error answers (rendered by it) carry them too.
        .layer(page_headers(&state, Csp::NoScript, Referrer::SameOrigin))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Cookies

fn clear_cookie(state: &AppState, name: &str, path: &str) -> HeaderValue {
    set_cookie(state, name, "", path, 0)
}

// ---------------------------------------------------------------------------------------------
// Sign-in, callback, sign-out, allow agents

/// Starts an intent: browser secret cookie, hashed intent item, redirect to the provider.
async fn start_intent(
    state: &AppState,
    purpose: IntentPurpose,
    session: Option<&Session>,
    return_to: Option<&ReturnPath>,
) -> Result<Response, ApiError> {
    let oidc = state.oidc.as_ref().ok_or(ApiError::SignInUnavailable)?;
    let browser = BrowserSecret::generate();
    let intent_state = random_hex(32);
    state.services.accounts.create_intent(&intent_state, &browser, purpose, session, return_to).await?;
    let url = oidc
        .authorize_url(
            &intent_state,
            &intent_nonce(&browser, &intent_state),
            &intent_verifier(&browser, &intent_state),
            purpose == IntentPurpose::AllowAgents,
        )
        .await?;
    let mut res = see_other(&url);
    let ttl = crate::service::sessions::INTENT_TTL_SECS;
    res.headers_mut().append(SET_COOKIE, set_cookie(state, SIGNIN_COOKIE, browser.expose(), CALLBACK_PATH, ttl));
    Ok(res)
}

/// The sign-in form: no field, or `return_to`, the page to come back to (a path on this
/// origin; anything else is refused, so the form cannot be made an open redirect).
async fn sign_in(State(state): State<AppState>, _: SameOrigin, body: axum::body::Bytes) -> Result<Response, ApiError> {
    let text = std::str::from_utf8(&body).map_err(|_| ApiError::InvalidRequest("the form is not UTF-8".into()))?;
    let form = pairs(text);
    if form.iter().any(|(k, _)| k != RETURN_TO) || form.len() > 1 {
        return Err(ApiError::InvalidRequest("the sign-in form takes one optional return_to".into()));
    }
    let unsafe_path = || ApiError::InvalidRequest("return_to must be a path on this site (one leading /)".into());
    let return_to = form.first().map(|(_, v)| ReturnPath::parse(v).ok_or_else(unsafe_path)).transpose()?;
    start_intent(&state, IntentPurpose::SignIn, None, return_to.as_ref()).await
}

/// `GET /account/sign-in[?return_to=…]`: the sign-in page (a sign-in starts by its form).
async fn sign_in_again(axum::extract::RawQuery(q): axum::extract::RawQuery) -> Response {
    see_other(&with_return_to(SIGN_IN_PAGE, return_to_of_query(q.as_deref()).as_ref()))
}

async fn allow_agents(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
) -> Result<Response, ApiError> {
    session.require_member()?;
    start_intent(&state, IntentPurpose::AllowAgents, Some(&session), None).await
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
            (e.status(), Page(SignInFailedPage { code: e.code(), reason })).into_response()
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
    let intent = state.services.accounts.consume_intent(&intent_state, &browser).await?;
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
    // A sign-in lands where the visitor was sent from (a checked return path), else here.
    let landing = match intent.purpose {
        IntentPurpose::SignIn => intent.return_to.as_deref().unwrap_or(SIGN_IN_PAGE),
        IntentPurpose::AllowAgents => SIGN_IN_PAGE,
    };
    let mut res = see_other(landing);
    let h = res.headers_mut();
    h.append(SET_COOKIE, clear_cookie(&state, SIGNIN_COOKIE, CALLBACK_PATH));
    match intent.purpose {
        IntentPurpose::SignIn => {
            let previous = cookie(&headers, SESSION_COOKIE).and_then(|v| BrowserSecret::parse(&v));
            let token = state.services.accounts.sign_in(&id, previous.as_ref()).await?;
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
            state.services.accounts.allow_agents(&current, &id).await?;
        }
    }
    Ok(res)
}

async fn sign_out(State(state): State<AppState>, _: SameOrigin, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(token) = cookie(&headers, SESSION_COOKIE).and_then(|v| BrowserSecret::parse(&v)) {
        state.services.accounts.sign_out(&token).await?;
    }
    let mut res = see_other("/account");
    res.headers_mut().append(SET_COOKIE, clear_cookie(&state, SESSION_COOKIE, "/"));
    Ok(res)
}

// ---------------------------------------------------------------------------------------------
// Agent bindings

async fn list_bindings(
    State(state): State<AppState>,
    BrowserSession(session): BrowserSession,
) -> Result<Json<BindingList>, ApiError> {
    Ok(Json(state.services.accounts.list_bindings(&session).await?))
}

async fn revoke(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(binding_ref): Path<String>,
    query: axum::extract::RawQuery,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    // Only the opaque reference in the path: no query or body is admitted.
    if query.0.is_some_and(|q| !q.is_empty()) || !body.is_empty() {
        return Err(ApiError::InvalidRequest("the request takes no query or body".into()));
    }
    Ok(Json(state.services.accounts.revoke_binding_ref(&session, &binding_ref).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeForm {
    binding_ref: String,
    /// `yes` once the person confirmed on the confirmation step.
    confirm: Option<String>,
}

/// The page's Revoke: first the account page asking to confirm (nothing revoked yet),
/// then the confirmed form revokes and redirects back (post/redirect/get).
async fn revoke_form(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Form(form): Form<RevokeForm>,
) -> Result<Response, ApiError> {
    if form.confirm.as_deref() != Some("yes") {
        session.require_member()?;
        let mut page = page_for(&state, Some(&session), None).await?;
        // Only a binding of this account is offered for revocation (as the revoke itself).
        let listed =
            page.bindings.as_ref().is_some_and(|l| l.bindings.iter().any(|b| b.binding_ref == form.binding_ref));
        if !listed {
            return Err(ApiError::NotFound);
        }
        page.confirm_revoke = Some(form.binding_ref);
        return Ok(Page(page).into_response());
    }
    state.services.accounts.revoke_binding_ref(&session, &form.binding_ref).await?;
    Ok(see_other("/account"))
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
    /// Signed out: the page the sign-in comes back to (a checked return path).
    return_to: Option<String>,
    /// A binding revoke awaiting the person's confirmation (its reference).
    confirm_revoke: Option<String>,
}

/// The account page of a session (signed out: the sign-in, coming back to `return_to`).
async fn page_for(
    state: &AppState,
    session: Option<&Session>,
    return_to: Option<ReturnPath>,
) -> Result<AccountPage, ApiError> {
    Ok(match session {
        None => AccountPage {
            signed_in: false,
            sign_in_available: state.oidc.is_some(),
            guest: false,
            account_ref: String::new(),
            bindings: None,
            return_to: return_to.map(|r| r.as_str().to_owned()),
            confirm_revoke: None,
        },
        Some(s) => AccountPage {
            signed_in: true,
            sign_in_available: state.oidc.is_some(),
            guest: s.policy.guest,
            account_ref: s.account_ref(),
            bindings: if s.policy.guest { None } else { Some(state.services.accounts.list_bindings(s).await?) },
            return_to: None,
            confirm_revoke: None,
        },
    })
}

/// `GET /account[?return_to=…]`: the account, or signed out the sign-in (an unsafe
/// `return_to` is dropped: that sign-in lands here).
async fn account_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    let session = session_of(&state, &headers).await?;
    Ok(Page(page_for(&state, session.as_ref(), return_to_of_query(q.as_deref())).await?).into_response())
}

/// `/`: what this service is and where to go next (signed in or not).
#[derive(Template)]
#[template(path = "landing.html")]
struct LandingPage {
    signed_in: bool,
}

async fn landing_page(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let signed_in = session_of(&state, &headers).await?.is_some();
    Ok(Page(LandingPage { signed_in }).into_response())
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

/// The MCP URL clients are given (the resource, or the MCP function URL where that
/// function is its own origin) and the metadata document on its origin.
fn mcp_of(state: &AppState) -> (String, String) {
    let url = state.services.config.mcp_url.clone();
    let metadata = match url.strip_suffix(Group::Mcp.resource_path()) {
        Some(origin) if url != state.services.config.resource => crate::http::resource_metadata_url(origin, Group::Mcp),
        _ => crate::http::resource_metadata_url(&state.services.config.public_base_url, Group::Mcp),
    };
    (url, metadata)
}

async fn agent_access_page(State(state): State<AppState>) -> Result<Response, ApiError> {
    let config = &state.services.config;
    let (resource, metadata_url) = mcp_of(&state);
    Ok(Page(AgentAccessPage {
        clients: client_setups(&resource, &data_oauth_scopes(&config.database_scopes)),
        resource,
        rest_base: format!("{}/api/v1/agent-runs", config.public_base_url),
        metadata_url,
        authorization_servers: config.oauth.authorization_servers.clone(),
        scopes: all_oauth_scopes(),
    })
    .into_response())
}

async fn agent_access_manifest(State(state): State<AppState>) -> Json<serde_json::Value> {
    let config = &state.services.config;
    let (resource, metadata_url) = mcp_of(&state);
    let clients: serde_json::Map<String, serde_json::Value> =
        client_setups(&resource, &data_oauth_scopes(&config.database_scopes))
            .into_iter()
            .map(|c| {
                let steps: Vec<_> = c
                    .steps
                    .iter()
                    .map(|s| serde_json::json!({ "label": s.label, "language": s.language, "text": s.text }))
                    .collect();
                let entry = serde_json::json!({
                    "name": c.name,
                    "works": c.works,
                    "needs_public_https": c.needs_public_https,
                    "available": c.available_at(&resource),
                    "server_name": c.server_name,
                    "steps": steps,
                });
                (c.id.to_owned(), entry)
            })
            .collect();
    Json(serde_json::json!({
        "schema": "helix.agent_access.v1",
        "resource": resource,
        "mcp_url": resource,
        "rest_base_url": format!("{}/api/v1/agent-runs", config.public_base_url),
        "protected_resource_metadata": metadata_url,
        "authorization_servers": config.oauth.authorization_servers,
        "scopes_supported": all_oauth_scopes(),
        "account_page": format!("{}/account", config.public_base_url),
        "clients": clients,
    }))
}

const STYLESHEET: &str = include_str!("../../../templates/account.css");

async fn stylesheet() -> Asset {
    Asset::css(STYLESHEET)
}

const REFS_SCRIPT: &str = include_str!("../../../templates/refs.js");

/// The copy buttons of shortened refs, for the pages whose policy runs a script.
async fn refs_script() -> Asset {
    Asset::script(REFS_SCRIPT)
}
