//! The pages kit of the cookie lanes: the browser session and its same-origin proof as
//! extractors (a cookie handler cannot forget the check: it names the extractor or gets
//! no session), one template responder, static assets, and the page security headers
//! with their policy variants. Never reads `Authorization` (the bearer lanes never meet
//! the cookie); depends on the session service and the limiter only.

pub mod actor;
pub mod flash;
pub mod human;
pub mod run_status;
pub mod sign_in_first;

use askama::Template;
use axum::extract::{FromRef, FromRequestParts};
use axum::response::{IntoResponse, Response};
use http::header::{
    CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower_http::set_header::SetResponseHeaderLayer;

use super::ratelimit::WindowKey;
use super::{AppState, Group};
use crate::domain::account::BrowserSecret;
use crate::error::ApiError;
use crate::service::sessions::Session;

pub const SESSION_COOKIE: &str = "helix_session";
/// The sign-in page a signed-out visitor is sent to.
pub const SIGN_IN_PAGE: &str = "/account";
/// Where the OpenID provider sends a browser back after sign-in.
pub const CALLBACK_PATH: &str = "/account/callback";
/// The action connectors' pairing page.
pub const PAIRING_PAGE_PATH: &str = "/account/room-connectors";

// ---------------------------------------------------------------------------------------------
// The cookie, the session and the same-origin rule

/// The single value of a cookie, or None when absent or sent more than once (fail closed).
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
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

/// A cookie mutation must come from the public origin: `Origin` when the browser sends
/// it, else `Sec-Fetch-Site: same-origin`; with neither, it is refused.
fn require_same_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
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
    state.services.accounts.resolve_session(&token).await
}

/// A signed-in browser (any account, guests included; handlers decide about guests).
/// Read-only pages only: whatever acts takes [`SameOriginSession`].
pub struct BrowserSession(pub Session);

impl FromRequestParts<AppState> for BrowserSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        session_of(state, &parts.headers).await?.map(BrowserSession).ok_or(ApiError::SessionRequired)
    }
}

/// Proof that the request comes from the public origin (a cookie request with no session
/// yet: sign-in, sign-out, the development provider's login).
pub struct SameOrigin;

impl<S: Send + Sync> FromRequestParts<S> for SameOrigin
where
    AppState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        require_same_origin(&AppState::from_ref(state), &parts.headers).map(|()| SameOrigin)
    }
}

/// A signed-in browser acting from the public origin, within its lane's per-account
/// window. In this order: no session is 401, then cross-site is 403, then a full window
/// is 429 (awaited here, so a 429 means nothing happened).
pub struct SameOriginSession(pub Session);

impl FromRequestParts<AppState> for SameOriginSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let BrowserSession(session) = BrowserSession::from_request_parts(parts, state).await?;
        require_same_origin(state, &parts.headers)?;
        if let Some(group) = parts.extensions.get::<Group>().copied().filter(|g| counts_accounts(*g)) {
            let limit = group.limits(state).principal_per_minute;
            let key = WindowKey::Account { group, account_id: session.account_id.clone() };
            state.limits.start(key, limit, state.services.clock.epoch())?.verdict().await?;
        }
        Ok(SameOriginSession(session))
    }
}

/// The cookie lanes that also count each signed-in account per minute (the observer and
/// the source-credential lanes); the account pages are held by the IP window alone.
fn counts_accounts(group: Group) -> bool {
    matches!(group, Group::Observer | Group::SourceBrowser)
}

// ---------------------------------------------------------------------------------------------
// Responders

const HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");

/// A rendered template as an HTML answer; a template that fails to render is a 500.
pub struct Page<T>(pub T);

impl<T: Template> IntoResponse for Page<T> {
    fn into_response(self) -> Response {
        match self.0.render() {
            Ok(body) => ([(CONTENT_TYPE, HTML)], body).into_response(),
            Err(e) => ApiError::internal(e).into_response(),
        }
    }
}

/// A refused form's answer on its page: for a client error (a refusal the person can act on:
/// a wrong invite code, a missing confirmation), the error's status and its message (code
/// and sentence; never a secret: typed errors carry none). A server error stays the error
/// response itself (`Err`).
pub(super) fn refusal_notice(e: ApiError) -> Result<(StatusCode, String), ApiError> {
    if e.status().is_server_error() {
        return Err(e);
    }
    Ok((e.status(), format!("{}: {}", e.code(), e)))
}

/// A static text asset of the pages (a stylesheet, a page script) with its type.
pub struct Asset {
    body: &'static str,
    content_type: &'static str,
}

impl Asset {
    pub const fn css(body: &'static str) -> Self {
        Asset { body, content_type: "text/css; charset=utf-8" }
    }

    pub const fn script(body: &'static str) -> Self {
        Asset { body, content_type: "text/javascript; charset=utf-8" }
    }
}

impl IntoResponse for Asset {
    fn into_response(self) -> Response {
        ([(CONTENT_TYPE, HeaderValue::from_static(self.content_type))], self.body).into_response()
    }
}

// ---------------------------------------------------------------------------------------------
// Shortened refs (the `short_ref` macro of templates/macros.html)

/// The script that gives every shortened ref a copy button (pages with a script policy).
pub const REFS_SCRIPT_PATH: &str = "/account/static/refs.js";

/// Values up to this many characters are shown whole.
const SHORT_REF_MAX: usize = 24;

/// A long id or hash as a person scans it: its kind prefix (`account:sha256:`, `run_`,
/// `agent-binding-`), the next 8 characters, an ellipsis and the last 4. The page keeps the
/// full value beside it (`title`, `data-ref`, the copy button).
pub fn short_ref(value: impl std::fmt::Display) -> String {
    let full = value.to_string();
    let chars: Vec<char> = full.chars().collect();
    if chars.len() <= SHORT_REF_MAX || chars.iter().any(|c| c.is_whitespace()) {
        return full; // short, or words rather than an identifier
    }
    // The kind prefix: up to the last separator among the first 16 characters, when what it
    // names is a word (a letter past `f`: never a hex digit, so a UUID or hash is no prefix).
    let window: String = chars.iter().take(16).collect();
    let prefix = match window.rfind([':', '_', '-']) {
        Some(i) if window[..i].chars().any(|c| c.is_ascii_alphabetic() && c.to_ascii_lowercase() > 'f') => {
            window[..=i].chars().count()
        }
        _ => 0,
    };
    if prefix + 8 + 4 + 2 > chars.len() {
        return full; // nothing worth hiding
    }
    let head: String = chars[..prefix + 8].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}\u{2026}{tail}")
}

// ---------------------------------------------------------------------------------------------
// Page security headers

/// The content security policy of a page lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Csp {
    /// No script at all; styles and forms from this origin (forms may also lead to the
    /// configured sign-in provider).
    NoScript,
    /// Exactly one same-origin script and its same-origin `fetch` (no inline script);
    /// forms stay on this origin.
    SameOriginScript,
}

impl Csp {
    pub fn policy(self, state: &AppState) -> String {
        match self {
            Csp::NoScript => {
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
            Csp::SameOriginScript => "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; \
                 img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
                .to_owned(),
        }
    }
}

/// The `Referrer-Policy` of a page lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Referrer {
    SameOrigin,
    /// For pages that show a secret once: not even this origin learns the page's URL.
    None,
}

impl Referrer {
    fn value(self) -> &'static str {
        match self {
            Referrer::SameOrigin => "same-origin",
            Referrer::None => "no-referrer",
        }
    }
}

type SetHeader = SetResponseHeaderLayer<HeaderValue>;

/// The four page security headers as one layer.
pub type PageHeaders = ServiceBuilder<Stack<SetHeader, Stack<SetHeader, Stack<SetHeader, Stack<SetHeader, Identity>>>>>;

/// The security headers of every answer of a page lane, errors included: applied
/// outside the pipeline (which renders the errors), replacing any value already set.
pub fn page_headers(state: &AppState, csp: Csp, referrer: Referrer) -> PageHeaders {
    let policy = HeaderValue::from_str(&csp.policy(state)).expect("ascii policy");
    ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(CONTENT_SECURITY_POLICY, policy))
        .layer(SetResponseHeaderLayer::overriding(X_FRAME_OPTIONS, HeaderValue::from_static("DENY")))
        .layer(SetResponseHeaderLayer::overriding(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .layer(SetResponseHeaderLayer::overriding(REFERRER_POLICY, HeaderValue::from_static(referrer.value())))
}

/// [`page_headers`] less the content security policy.
pub type PageHeadersButCsp = ServiceBuilder<Stack<SetHeader, Stack<SetHeader, Stack<SetHeader, Identity>>>>;

/// [`page_headers`] without the content security policy (for a lane whose answers set
/// their own, under a default the caller layers).
pub fn page_headers_but_csp(referrer: Referrer) -> PageHeadersButCsp {
    ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(X_FRAME_OPTIONS, HeaderValue::from_static("DENY")))
        .layer(SetResponseHeaderLayer::overriding(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .layer(SetResponseHeaderLayer::overriding(REFERRER_POLICY, HeaderValue::from_static(referrer.value())))
}

// ---------------------------------------------------------------------------------------------
// Forms, cookies and redirects of the pages

/// The `application/x-www-form-urlencoded` pairs of a query or form body, repeats kept.
pub(super) fn pairs(encoded: &str) -> Vec<(String, String)> {
    let url = reqwest::Url::parse(&format!("http://form.invalid/?{encoded}")).expect("a query parses");
    url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

/// The single value of `name`: None when absent, Err when sent twice with different values.
pub(super) fn single<'a>(pairs: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, ()> {
    let mut found: Option<&str> = None;
    for (k, v) in pairs.iter().filter(|(k, _)| k == name) {
        match found {
            Some(f) if f != v => return Err(()),
            _ => found = Some(v.as_str()),
        }
        let _ = k;
    }
    Ok(found)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Secure when configured.
pub(super) fn set_cookie(state: &AppState, name: &str, value: &str, path: &str, max_age: i64) -> HeaderValue {
    let secure = if state.services.config.browser.secure_cookies { "; Secure" } else { "" };
    HeaderValue::from_str(&format!("{name}={value}; Path={path}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"))
        .expect("cookie values are hex")
}

/// `303 See Other` to a path of this origin.
pub fn see_other(to: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    let to = HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static(SIGN_IN_PAGE));
    res.headers_mut().insert(LOCATION, to);
    res
}

/// Back to the action connectors' pairing page (`303`): a form's answer, or `GET` on it.
pub(super) async fn to_pairing_page() -> Response {
    see_other(PAIRING_PAGE_PATH)
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
    fn long_refs_are_shortened_with_their_kind_prefix() {
        assert_eq!(short_ref("room_abc"), "room_abc");
        let prose = "Lamoreaux, Phys. Rev. Lett. 78, 5 (1997)";
        assert_eq!(short_ref(prose), prose, "words are not an identifier");
        let account = format!("account:sha256:{}", "0123456789abcdef".repeat(4));
        assert_eq!(short_ref(&account), "account:sha256:01234567\u{2026}cdef");
        assert_eq!(short_ref("run_01JABCDEFGHJKMNPQRSTVWXYZ9"), "run_01JABCDE\u{2026}XYZ9");
        assert_eq!(short_ref("x".repeat(30) + "yz"), format!("{}\u{2026}xxyz", "x".repeat(8)));
        assert_eq!(short_ref("agent-binding-0123456789abcdef"), "agent-binding-01234567\u{2026}cdef");
        let uuid = "3f2a9c1d-4b2a-4c1e-9f00-0123456789ab";
        assert_eq!(short_ref(uuid), "3f2a9c1d\u{2026}89ab", "a UUID has no kind prefix");
        assert_eq!(short_ref("é".repeat(40)).chars().count(), 13, "counted in characters, not bytes");
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

    fn state() -> AppState {
        state_with(crate::config::tests::dev_config())
    }

    fn state_with(config: crate::config::Config) -> AppState {
        let executor = std::sync::Arc::new(crate::executor::scripted::ScriptedExecutor::new(vec![], None));
        AppState::new(crate::service::Services::new(config, std::sync::Arc::new(crate::store::NoStore), executor))
    }

    /// The security headers of `path` as served by `router` (method GET, no cookie).
    async fn page_headers_of(router: axum::Router, path: &str) -> Vec<(String, String)> {
        use tower::ServiceExt;
        let req = http::Request::get(path).header("host", "127.0.0.1:9000").body(axum::body::Body::empty()).unwrap();
        let res = router.oneshot(req).await.unwrap();
        ["content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy"]
            .iter()
            .map(|name| {
                let values: Vec<_> = res.headers().get_all(*name).iter().map(|v| v.to_str().unwrap()).collect();
                assert_eq!(values.len(), 1, "{path}: one {name}");
                (name.to_string(), values[0].to_owned())
            })
            .collect()
    }

    fn expected(csp: &str, referrer: &str) -> Vec<(String, String)> {
        [("content-security-policy", csp), ("x-frame-options", "DENY"), ("x-content-type-options", "nosniff")]
            .into_iter()
            .chain([("referrer-policy", referrer)])
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    const NO_SCRIPT_WITH_DEV_PROVIDER: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
        form-action 'self' http://127.0.0.1:9000; frame-ancestors 'none'; base-uri 'none'";
    const SAME_ORIGIN_SCRIPT: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; \
        img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

    #[test]
    fn the_no_script_policy_names_the_sign_in_provider_only_when_there_is_one() {
        let state = state();
        assert_eq!(Csp::NoScript.policy(&state), NO_SCRIPT_WITH_DEV_PROVIDER);
        let mut config = crate::config::tests::dev_config();
        config.browser.oidc = None;
        let state = state_with(config);
        assert_eq!(
            Csp::NoScript.policy(&state),
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
             base-uri 'none'"
        );
        assert_eq!(Csp::SameOriginScript.policy(&state), SAME_ORIGIN_SCRIPT);
    }

    #[tokio::test]
    async fn every_page_lane_answers_with_its_own_security_headers() {
        let s = state();
        let forms = expected(NO_SCRIPT_WITH_DEV_PROVIDER, "same-origin");
        assert_eq!(
            page_headers_of(crate::http::browser::account::router(s.clone()), "/account/static/account.css").await,
            forms
        );
        assert_eq!(page_headers_of(crate::http::browser::account::router(s.clone()), "/account/nowhere").await, forms);
        let observer = crate::http::browser::observer::router(s.clone());
        assert_eq!(
            page_headers_of(observer, crate::http::browser::observer::BASE).await,
            forms,
            "405 of the observer lane"
        );
        let provider = crate::http::oauth::dev_oidc::provider(&s);
        let dev = crate::http::oauth::dev_oidc::router(s.clone(), provider.expect("development provider"));
        assert_eq!(page_headers_of(dev, "/dev-oidc/nowhere").await, forms);
        let script = expected(SAME_ORIGIN_SCRIPT, "same-origin");
        assert_eq!(
            page_headers_of(crate::http::browser::room_pages::router(s.clone()), "/chat/static/chat.js").await,
            script
        );
        let console = crate::http::browser::run_console::router(s.clone());
        assert_eq!(page_headers_of(console, crate::http::browser::run_console::CONSOLE_SCRIPT_PATH).await, script);
        let claim = expected(SAME_ORIGIN_SCRIPT, "no-referrer");
        let browser = crate::http::connector::sources::browser_router(s.clone());
        assert_eq!(page_headers_of(browser, crate::http::connector::sources::CLAIM_SCRIPT_PATH).await, claim);
        let browser = crate::http::connector::sources::browser_router(s);
        assert_eq!(page_headers_of(browser, crate::service::sources::CLAIM_PAGE_PATH).await, claim, "sign-in redirect");
    }
}
