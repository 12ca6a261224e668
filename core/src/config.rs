//! The one typed configuration, read once at cold start. Nothing else reads the
//! environment. A missing or malformed variable fails with its name; production
//! fails closed on incomplete OAuth, HS256, or plain-HTTP public origins.

use std::time::Duration;

use jsonwebtoken::Algorithm;

use crate::domain::authority::TrustedKeys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Production,
    Development,
}

/// A secret whose `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[derive(Debug, Clone)]
pub struct OAuthConfig {
    pub issuer: String,
    pub audience: String,
    pub jwks_url: Option<String>,
    pub provider: String,
    pub algorithms: Vec<Algorithm>,
    /// Only outside production, with `HELIX_AGENT_ALLOW_LOCAL_HS256=1`.
    pub local_hs256_secret: Option<Secret>,
    pub authorization_servers: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum ExecutorConfig {
    /// POST turns to a Helix Ask endpoint, authenticated with a bearer token.
    Http { endpoint: String, bearer: Option<Secret> },
    /// Offline solver over a corpus on disk (development only).
    Local { corpus_dir: Option<std::path::PathBuf> },
    /// No executor: continuations fail their step as `executor_unavailable`.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub body_bytes: usize,
    pub ip_per_minute: u32,
    pub principal_per_minute: u32,
}

/// The proxy topology in front of the service (`TRUST_PROXY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustProxy {
    /// No proxy is trusted: nothing can prove HTTPS (development only).
    None,
    /// Requests arrive as API Gateway / function URL events, which accept HTTPS only.
    ApiGateway,
    /// TCP peers in these networks are proxies whose `X-Forwarded-Proto` and
    /// `X-Forwarded-For` are believed.
    Peers(Vec<ipnet::IpNet>),
}

/// Connection limits of the socket server (`helix serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// From the first byte of a request head (or from accept) to its last byte.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and no bytes arriving is closed after this.
    pub idle_timeout: Duration,
    /// From the end of the head to the end of the body.
    pub body_read_timeout: Duration,
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub public_base_url: String,
    /// The protected resource the metadata names: the configured audience (see `resource`).
    pub resource: String,
    pub oauth: OAuthConfig,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// Who may prove that a request arrived over HTTPS (`TRUST_PROXY`).
    pub trust_proxy: TrustProxy,
    /// Connection limits of `helix serve`.
    pub server: ServerLimits,
    pub database_scopes: Vec<String>,
    pub turn_timeout: Duration,
    pub gateway_timeout: Option<Duration>,
    pub deadline_margin: Duration,
    pub agent_limits: Limits,
    pub mcp_limits: Limits,
    /// The external room REST facade (`HELIX_ROOM_AGENT_*`).
    pub room_limits: Limits,
    /// The browser observer lane: per-IP and per-account (`HELIX_AGENT_RUN_OBSERVER_*`).
    pub observer_limits: Limits,
    /// Room sources: the browser credential-claim lane and the producer ingress.
    pub sources: SourceConfig,
    pub table_name: Option<String>,
    pub executor: ExecutorConfig,
    pub trusted_terminal_keys: TrustedKeys,
    pub browser: BrowserConfig,
}

/// Room sources (`HELIX_ROOM_SOURCE_*`, `HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceConfig {
    /// Same-origin source-manager and credential-claim lane: per IP and per account.
    pub browser_limits: Limits,
    /// Producer ingress: body limit, per-IP (before auth) and per-source (after auth).
    pub ingress_limits: Limits,
    /// Freshness ceiling of bound-room evidence.
    pub evidence_max_age: Duration,
    /// How long a stored observation lives (TTL).
    pub observation_ttl: Duration,
    /// How long a turn of a `bound_room_environment_probe` run waits for the producer's
    /// answer (`HELIX_ROOM_PROBE_WAIT_MS`), clamped again to the turn's own budget.
    pub probe_wait: Duration,
}

/// The browser lane: sign-in through OpenID Connect and the `helix_session` cookie.
#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The public origin (scheme://host[:port]) every cookie mutation must come from.
    pub public_origin: String,
    /// The OpenID provider people sign in with; None: browser sign-in is off.
    pub oidc: Option<OidcConfig>,
    /// Development only: `helix serve` hosts the development OpenID provider at this issuer.
    pub dev_provider: bool,
    pub session_idle: Duration,
    pub session_absolute: Duration,
    /// `Secure` on cookies (always in production).
    pub secure_cookies: bool,
}

#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// Issuer URL (discovery at `{issuer}/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// Admitted ID-token signature algorithms (JOSE names).
    pub algorithms: Vec<String>,
}

/// Path of the development OpenID provider under the public base URL.
pub const DEV_PROVIDER_PATH: &str = "/dev-oidc";
pub const DEV_PROVIDER_CLIENT_ID: &str = "helix-local-browser";

impl BrowserConfig {
    /// `HELIX_BROWSER_*`: a step of its own, after the public base URL and OAuth settings.
    fn from_env(env: &Env<'_>, mode: Mode, public_base_url: &str, oauth_issuer: &str) -> Result<Self, ConfigError> {
        let prod = mode == Mode::Production;
        let public_origin = origin_of(public_base_url)
            .ok_or_else(|| malformed("CASIMIR_PUBLIC_BASE_URL", "must be scheme://host[:port][/path]"))?;
        let dev_provider = match env.get("HELIX_BROWSER_DEV_PROVIDER").as_deref() {
            Some("1") if prod => {
                return Err(ConfigError::UnsafeProduction("HELIX_BROWSER_DEV_PROVIDER is a development path".into()));
            }
            Some("1") => true,
            Some("0") => false,
            None => !prod && env.get("HELIX_BROWSER_OIDC_ISSUER").is_none(),
            Some(_) => return Err(malformed("HELIX_BROWSER_DEV_PROVIDER", "must be 0 or 1")),
        };
        let issuer = env.get("HELIX_BROWSER_OIDC_ISSUER");
        let client_id = env.get("HELIX_BROWSER_OIDC_CLIENT_ID");
        let client_secret = env.get("HELIX_BROWSER_OIDC_CLIENT_SECRET").map(Secret::new);
        let algorithms = match env.get("HELIX_BROWSER_OIDC_ALGORITHMS") {
            Some(list) => list.split(',').map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()).collect(),
            None if dev_provider => vec!["EdDSA".to_owned()],
            None => vec!["RS256".to_owned()],
        };
        if let Some(a) = algorithms.iter().find(|a| parse_asymmetric(a).is_none()) {
            return Err(malformed(
                "HELIX_BROWSER_OIDC_ALGORITHMS",
                format!("{a:?} is not an admitted asymmetric algorithm"),
            ));
        }
        let oidc = match (issuer, client_id, dev_provider) {
            (Some(_), _, true) => {
                return Err(malformed("HELIX_BROWSER_OIDC_ISSUER", "set either it or HELIX_BROWSER_DEV_PROVIDER=1"));
            }
            (None, None, true) => Some(OidcConfig {
                issuer: format!("{public_base_url}{DEV_PROVIDER_PATH}"),
                client_id: DEV_PROVIDER_CLIENT_ID.into(),
                client_secret: None,
                algorithms,
            }),
            (None, None, false) if client_secret.is_none() => None,
            (Some(issuer), Some(client_id), false) => {
                if prod {
                    if !issuer.starts_with("https://") {
                        return Err(ConfigError::UnsafeProduction("HELIX_BROWSER_OIDC_ISSUER must be https".into()));
                    }
                    // The binding a step-up creates is for the agent issuer: both must be one server.
                    if issuer != oauth_issuer {
                        return Err(ConfigError::UnsafeProduction(
                            "HELIX_BROWSER_OIDC_ISSUER must equal HELIX_AGENT_OAUTH_ISSUER".into(),
                        ));
                    }
                    if client_secret.is_none() {
                        return Err(ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_SECRET"));
                    }
                }
                Some(OidcConfig { issuer, client_id, client_secret, algorithms })
            }
            (None, _, false) => return Err(ConfigError::Missing("HELIX_BROWSER_OIDC_ISSUER")),
            (Some(_), None, false) => return Err(ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_ID")),
            (None, Some(_), true) => {
                return Err(malformed("HELIX_BROWSER_OIDC_CLIENT_ID", "the development provider has its own client"));
            }
        };
        let idle = env.number("HELIX_BROWSER_SESSION_IDLE_SECONDS", 2 * 3600)?.clamp(60, 7 * 24 * 3600);
        let absolute = env.number("HELIX_BROWSER_SESSION_ABSOLUTE_SECONDS", 12 * 3600)?.clamp(idle, 30 * 24 * 3600);
        Ok(BrowserConfig {
            public_origin,
            oidc,
            dev_provider,
            session_idle: Duration::from_secs(idle),
            session_absolute: Duration::from_secs(absolute),
            secure_cookies: prod || public_base_url.starts_with("https://"),
        })
    }
}

/// `scheme://host[:port]` of a URL (the Origin a browser sends for it).
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    (matches!(scheme, "http" | "https") && !authority.is_empty() && !authority.contains('@'))
        .then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{name} is malformed: {problem}")]
    Malformed { name: &'static str, problem: String },
    #[error("refusing to start in production: {0}")]
    UnsafeProduction(String),
    #[error("refusing to start: {0}")]
    Inconsistent(String),
}

fn malformed(name: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Malformed { name, problem: problem.into() }
}

struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Env<'_> {
    fn get(&self, name: &'static str) -> Option<String> {
        (self.lookup)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }
    fn required(&self, name: &'static str) -> Result<String, ConfigError> {
        self.get(name).ok_or(ConfigError::Missing(name))
    }
    fn list(&self, name: &'static str) -> Vec<String> {
        self.get(name)
            .map(|v| v.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }
    fn number(&self, name: &'static str, default: u64) -> Result<u64, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| malformed(name, "not a whole number")),
        }
    }
}

/// Defaults for `helix serve` (development); Lambda functions default to production.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultMode {
    Production,
    Development,
}

impl Config {
    pub fn from_env(default_mode: DefaultMode) -> Result<Self, ConfigError> {
        Self::from_lookup(default_mode, &|name| std::env::var(name).ok())
    }

    /// Reads every variable in named steps; each step fails with the variable's name.
    pub fn from_lookup(
        default_mode: DefaultMode,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let env = Env { lookup };
        let mode = mode(&env, default_mode)?;
        let prod = mode == Mode::Production;
        // The order of these steps is the order in which a broken deployment hears about
        // its problems: the unsafe production paths first.
        let local_hs256_secret = local_hs256(&env, prod)?;
        let algorithms = algorithms(&env)?;
        let public_base_url = public_base_url(&env, prod)?;
        let oauth = oauth(&env, prod, local_hs256_secret, algorithms)?;
        let resource = resource(&env, &public_base_url, &oauth.audience)?;
        let (allowed_hosts, allowed_origins) = hosts_and_origins(&env, prod)?;
        let turn_ms = env.number("HELIX_AGENT_TURN_TIMEOUT_MS", 120_000)?.clamp(1_000, 900_000);
        let gateway_timeout = match env.get("HELIX_GATEWAY_TIMEOUT_MS") {
            None => None,
            Some(_) => Some(Duration::from_millis(env.number("HELIX_GATEWAY_TIMEOUT_MS", 0)?)),
        };
        let browser = BrowserConfig::from_env(&env, mode, &public_base_url, &oauth.issuer)?;
        Ok(Config {
            browser,
            mode,
            public_base_url,
            resource,
            oauth,
            allowed_hosts,
            allowed_origins,
            trust_proxy: trust_proxy(&env, prod)?,
            server: server_limits(&env)?,
            database_scopes: env.list("HELIX_AGENT_DATABASE_SCOPES"),
            turn_timeout: Duration::from_millis(turn_ms),
            gateway_timeout,
            deadline_margin: Duration::from_millis(env.number("HELIX_DEADLINE_MARGIN_MS", 1_500)?),
            agent_limits: limits(
                &env,
                "HELIX_AGENT_BODY_LIMIT",
                "HELIX_AGENT_IP_RATE_LIMIT",
                "HELIX_AGENT_PRINCIPAL_RATE_LIMIT",
            )?,
            mcp_limits: limits(
                &env,
                "HELIX_MCP_BODY_LIMIT",
                "HELIX_MCP_IP_RATE_LIMIT",
                "HELIX_MCP_PRINCIPAL_RATE_LIMIT",
            )?,
            room_limits: limits(
                &env,
                "HELIX_ROOM_AGENT_BODY_LIMIT",
                "HELIX_ROOM_AGENT_IP_RATE_LIMIT",
                "HELIX_ROOM_AGENT_PRINCIPAL_RATE_LIMIT",
            )?,
            // The observer lane has no body-limit variable: its body is a bounded snapshot
            // (12,000 characters), so 64 KiB covers any valid request.
            observer_limits: Limits {
                body_bytes: 64 * 1024,
                ..limits(
                    &env,
                    "HELIX_ROOM_AGENT_BODY_LIMIT",
                    "HELIX_AGENT_RUN_OBSERVER_IP_RATE_LIMIT",
                    "HELIX_AGENT_RUN_OBSERVER_ACCOUNT_RATE_LIMIT",
                )?
            },
            sources: sources(&env)?,
            table_name: env.get("HELIX_TABLE_NAME"),
            executor: executor(&env, prod)?,
            trusted_terminal_keys: match env.get("HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON") {
                None => TrustedKeys::default(),
                Some(json) => TrustedKeys::from_json(&json)
                    .map_err(|p| malformed("HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON", p))?,
            },
        })
    }

    /// Receipt and claim lease: at least two minutes, else one minute over the turn timeout.
    pub fn lease(&self) -> Duration {
        (self.turn_timeout + Duration::from_secs(60)).max(Duration::from_secs(120))
    }
}

fn mode(env: &Env, default_mode: DefaultMode) -> Result<Mode, ConfigError> {
    match env.get("HELIX_ENV").as_deref() {
        None => Ok(match default_mode {
            DefaultMode::Production => Mode::Production,
            DefaultMode::Development => Mode::Development,
        }),
        Some("production") => Ok(Mode::Production),
        Some("development") => Ok(Mode::Development),
        Some(other) => Err(malformed("HELIX_ENV", format!("{other:?} is not production or development"))),
    }
}

fn public_base_url(env: &Env, prod: bool) -> Result<String, ConfigError> {
    let url = match env.get("CASIMIR_PUBLIC_BASE_URL") {
        Some(u) => u.trim_end_matches('/').to_owned(),
        None if prod => return Err(ConfigError::Missing("CASIMIR_PUBLIC_BASE_URL")),
        None => "http://127.0.0.1:9000".into(),
    };
    if prod && !url.starts_with("https://") {
        return Err(ConfigError::UnsafeProduction("CASIMIR_PUBLIC_BASE_URL must be https".into()));
    }
    Ok(url)
}

/// A variable required in production, with a development default.
fn dev_default(env: &Env, prod: bool, name: &'static str, default: &str) -> Result<String, ConfigError> {
    match env.get(name) {
        Some(v) => Ok(v),
        None if prod => Err(ConfigError::Missing(name)),
        None => Ok(default.to_owned()),
    }
}

fn algorithms(env: &Env) -> Result<Vec<Algorithm>, ConfigError> {
    match env.get("HELIX_AGENT_OAUTH_ALGORITHMS") {
        None => Ok(vec![Algorithm::RS256]),
        Some(list) => list
            .split(',')
            .map(|a| {
                parse_asymmetric(a.trim()).ok_or_else(|| {
                    malformed("HELIX_AGENT_OAUTH_ALGORITHMS", format!("{a:?} is not an admitted asymmetric algorithm"))
                })
            })
            .collect(),
    }
}

fn oauth(
    env: &Env,
    prod: bool,
    local_hs256_secret: Option<Secret>,
    algorithms: Vec<Algorithm>,
) -> Result<OAuthConfig, ConfigError> {
    let issuer = dev_default(env, prod, "HELIX_AGENT_OAUTH_ISSUER", "helix-local-issuer")?;
    let audience = dev_default(env, prod, "HELIX_AGENT_OAUTH_AUDIENCE", "helix-local-resource")?;
    let provider = dev_default(env, prod, "HELIX_AGENT_OAUTH_PROVIDER", "helix-local")?;
    let jwks_url = env.get("HELIX_AGENT_OAUTH_JWKS_URL");
    if prod {
        let url = jwks_url.as_deref().ok_or(ConfigError::Missing("HELIX_AGENT_OAUTH_JWKS_URL"))?;
        if !url.starts_with("https://") {
            return Err(ConfigError::UnsafeProduction("HELIX_AGENT_OAUTH_JWKS_URL must be https".into()));
        }
    } else if jwks_url.is_none() && local_hs256_secret.is_none() {
        return Err(ConfigError::Missing("HELIX_AGENT_OAUTH_JWKS_URL (or the local HS256 path)"));
    }
    let mut authorization_servers = env.list("HELIX_AGENT_OAUTH_AUTHORIZATION_SERVERS");
    if authorization_servers.is_empty() {
        authorization_servers.push(issuer.clone());
    }
    Ok(OAuthConfig { issuer, audience, jwks_url, provider, algorithms, local_hs256_secret, authorization_servers })
}

fn local_hs256(env: &Env, prod: bool) -> Result<Option<Secret>, ConfigError> {
    if env.get("HELIX_AGENT_ALLOW_LOCAL_HS256").as_deref() != Some("1") {
        return Ok(None);
    }
    if prod {
        return Err(ConfigError::UnsafeProduction("HELIX_AGENT_ALLOW_LOCAL_HS256 is a nonproduction test path".into()));
    }
    let secret = env.required("HELIX_AGENT_LOCAL_JWT_SECRET")?;
    if secret.chars().count() < 32 {
        return Err(malformed("HELIX_AGENT_LOCAL_JWT_SECRET", "must be at least 32 characters"));
    }
    Ok(Some(Secret::new(secret)))
}

/// The protected resource is the configured audience, published as the metadata's
/// `resource`. It agrees with the public base URL when it is an absolute URL on the
/// same origin (scheme, host, port), with no userinfo, query or fragment; otherwise the
/// process refuses to start. Only the development default audience
/// (`helix-local-resource`, kept port-independent so `helix dev-token` tokens work against
/// a server on any port) names no URL: the resource is then `{public base URL}/mcp`.
fn resource(env: &Env, base: &str, audience: &str) -> Result<String, ConfigError> {
    if env.get("HELIX_AGENT_OAUTH_AUDIENCE").is_none() {
        return Ok(format!("{base}/mcp"));
    }
    let disagree = |why: &str| {
        ConfigError::Inconsistent(format!(
            "HELIX_AGENT_OAUTH_AUDIENCE {why}; the metadata's resource is the audience, so it must be a URL on \
             CASIMIR_PUBLIC_BASE_URL's origin"
        ))
    };
    let base = reqwest::Url::parse(base).map_err(|_| malformed("CASIMIR_PUBLIC_BASE_URL", "not an absolute URL"))?;
    let aud = reqwest::Url::parse(audience).map_err(|_| disagree("is not an absolute URL"))?;
    if !matches!(aud.scheme(), "https" | "http") {
        return Err(disagree("is not an http(s) URL"));
    }
    if !aud.username().is_empty() || aud.password().is_some() || aud.query().is_some() || aud.fragment().is_some() {
        return Err(disagree("carries userinfo, a query or a fragment"));
    }
    if aud.origin() != base.origin() {
        return Err(disagree("is on another origin than CASIMIR_PUBLIC_BASE_URL"));
    }
    Ok(audience.to_owned())
}

fn hosts_and_origins(env: &Env, prod: bool) -> Result<(Vec<String>, Vec<String>), ConfigError> {
    let mut allowed_hosts = env.list("HELIX_AGENT_ALLOWED_HOSTS");
    if allowed_hosts.is_empty() {
        if prod {
            return Err(ConfigError::Missing("HELIX_AGENT_ALLOWED_HOSTS"));
        }
        allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "[::1]".into()];
    }
    Ok((allowed_hosts, env.list("HELIX_AGENT_ALLOWED_ORIGINS")))
}

/// `TRUST_PROXY`: who may tell us the request arrived over HTTPS. `apigateway` (the
/// Lambda event's own front door), or a list of proxy addresses (`loopback`, IPs,
/// CIDRs) whose single `X-Forwarded-Proto` is believed. Required in production, where
/// nothing else can prove HTTPS; hop counts and `true` (trust any sender) are refused.
fn trust_proxy(env: &Env, prod: bool) -> Result<TrustProxy, ConfigError> {
    const NAME: &str = "TRUST_PROXY";
    let Some(value) = env.get(NAME) else {
        return if prod { Err(ConfigError::Missing(NAME)) } else { Ok(TrustProxy::None) };
    };
    match value.to_ascii_lowercase().as_str() {
        "none" | "false" if prod => Err(ConfigError::UnsafeProduction(
            "TRUST_PROXY=none: helix does not terminate TLS; name the proxy that does".into(),
        )),
        "none" | "false" => Ok(TrustProxy::None),
        "apigateway" => Ok(TrustProxy::ApiGateway),
        list => {
            let mut nets = vec![];
            for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match item {
                    "loopback" => nets
                        .extend(["127.0.0.0/8", "::1/128"].map(|n| n.parse::<ipnet::IpNet>().expect("loopback net"))),
                    _ => {
                        let net = item
                            .parse::<ipnet::IpNet>()
                            .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                            .map_err(|_| {
                                malformed(NAME, format!("{item:?} is not apigateway, none, loopback, an IP or a CIDR"))
                            })?;
                        if prod && net.prefix_len() == 0 {
                            return Err(ConfigError::UnsafeProduction(format!(
                                "TRUST_PROXY={item} trusts every sender's X-Forwarded-Proto"
                            )));
                        }
                        nets.push(net);
                    }
                }
            }
            if nets.is_empty() {
                return Err(malformed(NAME, "names no proxy"));
            }
            Ok(TrustProxy::Peers(nets))
        }
    }
}

/// Connection limits of `helix serve` (Lambda has no connections of its own).
fn server_limits(env: &Env) -> Result<ServerLimits, ConfigError> {
    let ms = |name: &'static str, default: u64| -> Result<Duration, ConfigError> {
        match env.number(name, default)? {
            n @ 1..=3_600_000 => Ok(Duration::from_millis(n)),
            _ => Err(malformed(name, "must be 1-3600000 ms")),
        }
    };
    let max_connections = match env.number("HELIX_SERVE_MAX_CONNECTIONS", 512)? {
        n @ 1..=65_535 => n as usize,
        _ => return Err(malformed("HELIX_SERVE_MAX_CONNECTIONS", "must be 1-65535")),
    };
    Ok(ServerLimits {
        header_read_timeout: ms("HELIX_SERVE_HEADER_TIMEOUT_MS", 10_000)?,
        idle_timeout: ms("HELIX_SERVE_IDLE_TIMEOUT_MS", 60_000)?,
        body_read_timeout: ms("HELIX_SERVE_BODY_TIMEOUT_MS", 30_000)?,
        max_connections,
    })
}

fn limits(env: &Env, body: &'static str, ip: &'static str, principal: &'static str) -> Result<Limits, ConfigError> {
    Ok(Limits {
        body_bytes: env.number(body, 256 * 1024)?.clamp(1024, 6 * 1024 * 1024) as usize,
        ip_per_minute: env.number(ip, 600)? as u32,
        principal_per_minute: env.number(principal, 300)? as u32,
    })
}

/// Room sources: the browser credential lane (same-origin, per IP and per account) and
/// the producer ingress (its own body limit, per IP before auth, per source after).
fn sources(env: &Env) -> Result<SourceConfig, ConfigError> {
    Ok(SourceConfig {
        browser_limits: Limits {
            body_bytes: 16 * 1024,
            ..limits(
                env,
                "HELIX_ROOM_AGENT_BODY_LIMIT",
                "HELIX_ROOM_SOURCE_BROWSER_IP_RATE_LIMIT",
                "HELIX_ROOM_SOURCE_BROWSER_ACCOUNT_RATE_LIMIT",
            )?
        },
        ingress_limits: Limits {
            body_bytes: env.number("HELIX_ROOM_SOURCE_INGRESS_BODY_LIMIT", 64 * 1024)?.clamp(1024, 1024 * 1024)
                as usize,
            ip_per_minute: env.number("HELIX_ROOM_SOURCE_INGRESS_IP_RATE_LIMIT", 1_200)? as u32,
            principal_per_minute: env.number("HELIX_ROOM_SOURCE_INGRESS_SOURCE_RATE_LIMIT", 600)? as u32,
        },
        evidence_max_age: Duration::from_millis(
            env.number("HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS", 120_000)?.clamp(1_000, 86_400_000),
        ),
        observation_ttl: Duration::from_secs(
            env.number("HELIX_ROOM_SOURCE_OBSERVATION_TTL_SECS", 3_600)?.clamp(60, 7 * 86_400),
        ),
        probe_wait: Duration::from_millis(env.number("HELIX_ROOM_PROBE_WAIT_MS", 5_000)?.clamp(100, 25_000)),
    })
}

fn executor(env: &Env, prod: bool) -> Result<ExecutorConfig, ConfigError> {
    Ok(match env.get("HELIX_ASK_ENDPOINT") {
        Some(endpoint) => {
            if prod && !endpoint.starts_with("https://") {
                return Err(ConfigError::UnsafeProduction("HELIX_ASK_ENDPOINT must be https".into()));
            }
            let bearer = env.get("HELIX_ASK_BEARER_TOKEN").map(Secret::new);
            if prod && bearer.is_none() {
                return Err(ConfigError::Missing("HELIX_ASK_BEARER_TOKEN (required with HELIX_ASK_ENDPOINT)"));
            }
            ExecutorConfig::Http { endpoint, bearer }
        }
        None if prod => ExecutorConfig::None,
        None => ExecutorConfig::Local { corpus_dir: env.get("HELIX_LOCAL_CORPUS_DIR").map(Into::into) },
    })
}

fn parse_asymmetric(name: &str) -> Option<Algorithm> {
    use Algorithm::*;
    Some(match name {
        "RS256" => RS256,
        "RS384" => RS384,
        "RS512" => RS512,
        "PS256" => PS256,
        "PS384" => PS384,
        "PS512" => PS512,
        "ES256" => ES256,
        "ES384" => ES384,
        "EdDSA" => EdDSA,
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The development configuration with the local HS256 path, for unit tests elsewhere.
    pub(crate) fn dev_config() -> Config {
        cfg(
            DefaultMode::Development,
            &[
                ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
                ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
            ],
        )
        .unwrap()
    }

    fn cfg(mode: DefaultMode, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(mode, &move |k| map.get(k).cloned())
    }

    const PROD: &[(&str, &str)] = &[
        ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
        ("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/"),
        ("HELIX_AGENT_OAUTH_AUDIENCE", "https://api.example.com/mcp"),
        ("HELIX_AGENT_OAUTH_JWKS_URL", "https://issuer.example.com/.well-known/jwks.json"),
        ("HELIX_AGENT_OAUTH_PROVIDER", "auth0"),
        ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
        ("TRUST_PROXY", "apigateway"),
    ];

    fn prod_with(changes: &[(&'static str, &'static str)]) -> Result<Config, ConfigError> {
        let mut vars = PROD.to_vec();
        for (k, v) in changes {
            vars.retain(|(name, _)| name != k);
            vars.push((k, v));
        }
        cfg(DefaultMode::Production, &vars)
    }

    #[test]
    fn production_refuses_an_audience_on_another_origin_than_the_public_base_url() {
        for audience in [
            "https://other.example.com/mcp",
            "http://api.example.com/mcp",
            "https://api.example.com:8443/mcp",
            "api.example.com/mcp",
            "https://api.example.com/mcp?x=1",
            "https://user@api.example.com/mcp",
            "helix-local-resource",
        ] {
            assert!(
                matches!(prod_with(&[("HELIX_AGENT_OAUTH_AUDIENCE", audience)]), Err(ConfigError::Inconsistent(_))),
                "{audience}"
            );
        }
        for audience in ["https://api.example.com/mcp", "https://API.example.com:443/", "https://api.example.com"] {
            assert_eq!(prod_with(&[("HELIX_AGENT_OAUTH_AUDIENCE", audience)]).unwrap().resource, audience);
        }
    }

    #[test]
    fn a_configured_development_audience_must_agree_too() {
        let base = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
            ("CASIMIR_PUBLIC_BASE_URL", "http://127.0.0.1:9000"),
        ];
        let mut vars = base.to_vec();
        vars.push(("HELIX_AGENT_OAUTH_AUDIENCE", "http://localhost:9000/mcp"));
        assert!(matches!(cfg(DefaultMode::Development, &vars), Err(ConfigError::Inconsistent(_))));
        vars.pop();
        vars.push(("HELIX_AGENT_OAUTH_AUDIENCE", "http://127.0.0.1:9000/mcp"));
        assert!(cfg(DefaultMode::Development, &vars).is_ok());
        let default = cfg(DefaultMode::Development, &base).unwrap();
        assert_eq!(default.oauth.audience, "helix-local-resource");
        assert_eq!(default.resource, "http://127.0.0.1:9000/mcp", "the development default names no URL");
        assert_eq!(cfg(DefaultMode::Development, &vars).unwrap().resource, "http://127.0.0.1:9000/mcp");
    }

    #[test]
    fn trust_proxy_is_required_in_production_and_never_trusts_everyone() {
        let vars: Vec<_> = PROD.iter().copied().filter(|(k, _)| *k != "TRUST_PROXY").collect();
        assert_eq!(cfg(DefaultMode::Production, &vars).unwrap_err(), ConfigError::Missing("TRUST_PROXY"));
        for unsafe_value in ["none", "0.0.0.0/0", "::/0"] {
            assert!(matches!(prod_with(&[("TRUST_PROXY", unsafe_value)]), Err(ConfigError::UnsafeProduction(_))));
        }
        for junk in ["true", "1", "10.0.0.0/33", ",", "loopback, nonsense"] {
            assert!(matches!(prod_with(&[("TRUST_PROXY", junk)]), Err(ConfigError::Malformed { .. })), "{junk}");
        }
        assert_eq!(prod_with(&[]).unwrap().trust_proxy, TrustProxy::ApiGateway);
        let c = prod_with(&[("TRUST_PROXY", "loopback, 10.1.0.0/16,192.0.2.7")]).unwrap();
        let TrustProxy::Peers(nets) = c.trust_proxy else { panic!("peers") };
        assert_eq!(nets.len(), 4);
        assert_eq!(dev_config().trust_proxy, TrustProxy::None);
    }

    #[test]
    fn server_limits_have_defaults_and_refuse_zero() {
        let c = dev_config();
        assert_eq!(c.server.header_read_timeout, Duration::from_secs(10));
        assert_eq!(c.server.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.server.body_read_timeout, Duration::from_secs(30));
        assert_eq!(c.server.max_connections, 512);
        for name in [
            "HELIX_SERVE_HEADER_TIMEOUT_MS",
            "HELIX_SERVE_IDLE_TIMEOUT_MS",
            "HELIX_SERVE_BODY_TIMEOUT_MS",
            "HELIX_SERVE_MAX_CONNECTIONS",
        ] {
            assert!(matches!(prod_with(&[(name, "0")]), Err(ConfigError::Malformed { name: n, .. }) if n == name));
        }
        let c = prod_with(&[("HELIX_SERVE_MAX_CONNECTIONS", "3"), ("HELIX_SERVE_IDLE_TIMEOUT_MS", "250")]).unwrap();
        assert_eq!((c.server.max_connections, c.server.idle_timeout), (3, Duration::from_millis(250)));
    }

    #[test]
    fn production_starts_with_complete_oauth_config() {
        let c = cfg(DefaultMode::Production, PROD).unwrap();
        assert_eq!(c.mode, Mode::Production);
        assert_eq!(c.oauth.algorithms, vec![Algorithm::RS256]);
        assert_eq!(c.turn_timeout, Duration::from_secs(120));
        assert_eq!(c.agent_limits.body_bytes, 256 * 1024);
    }

    #[test]
    fn production_refuses_each_missing_oauth_variable() {
        for skip in [
            "HELIX_AGENT_OAUTH_ISSUER",
            "HELIX_AGENT_OAUTH_AUDIENCE",
            "HELIX_AGENT_OAUTH_JWKS_URL",
            "HELIX_AGENT_OAUTH_PROVIDER",
            "CASIMIR_PUBLIC_BASE_URL",
            "HELIX_AGENT_ALLOWED_HOSTS",
        ] {
            let vars: Vec<_> = PROD.iter().copied().filter(|(k, _)| *k != skip).collect();
            assert_eq!(cfg(DefaultMode::Production, &vars).unwrap_err(), ConfigError::Missing(skip), "{skip}");
        }
    }

    #[test]
    fn production_refuses_hs256_symmetric_algorithms_and_http() {
        let mut vars = PROD.to_vec();
        vars.push(("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"));
        vars.push(("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"));
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::UnsafeProduction(_))));
        let mut vars = PROD.to_vec();
        vars.push(("HELIX_AGENT_OAUTH_ALGORITHMS", "RS256,HS256"));
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::Malformed { .. })));
        let mut vars = PROD.to_vec();
        vars[0] = ("CASIMIR_PUBLIC_BASE_URL", "http://api.example.com");
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::UnsafeProduction(_))));
    }

    #[test]
    fn production_helix_ask_needs_https_and_a_bearer() {
        let mut vars = PROD.to_vec();
        vars.push(("HELIX_ASK_ENDPOINT", "https://ask.example.com/v1/turns"));
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::Missing(_))));
        vars.push(("HELIX_ASK_BEARER_TOKEN", "ask-service-credential"));
        let c = cfg(DefaultMode::Production, &vars).unwrap();
        assert!(matches!(c.executor, ExecutorConfig::Http { bearer: Some(_), .. }));
        assert!(!format!("{c:?}").contains("ask-service-credential"));
        let mut http = PROD.to_vec();
        http.push(("HELIX_ASK_ENDPOINT", "http://ask.example.com/v1/turns"));
        http.push(("HELIX_ASK_BEARER_TOKEN", "x"));
        assert!(matches!(cfg(DefaultMode::Production, &http), Err(ConfigError::UnsafeProduction(_))));
    }

    #[test]
    fn local_hs256_needs_a_32_character_secret() {
        let short = [("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"), ("HELIX_AGENT_LOCAL_JWT_SECRET", "short")];
        assert!(matches!(
            cfg(DefaultMode::Development, &short),
            Err(ConfigError::Malformed { name: "HELIX_AGENT_LOCAL_JWT_SECRET", .. })
        ));
        let ok = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
        ];
        let c = cfg(DefaultMode::Development, &ok).unwrap();
        assert!(c.oauth.local_hs256_secret.is_some());
        assert!(!format!("{:?}", c).contains("0123456789abcdef"), "secrets never appear in Debug");
    }

    #[test]
    fn turn_timeout_is_clamped_and_lease_is_at_least_two_minutes() {
        let ok = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
            ("HELIX_AGENT_TURN_TIMEOUT_MS", "5"),
        ];
        let c = cfg(DefaultMode::Development, &ok).unwrap();
        assert_eq!(c.turn_timeout, Duration::from_secs(1));
        assert_eq!(c.lease(), Duration::from_secs(120));
    }
}

#[cfg(test)]
mod browser_tests {
    use super::*;

    fn cfg(mode: DefaultMode, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(mode, &move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    const PROD: &[(&str, &str)] = &[
        ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
        ("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/"),
        ("HELIX_AGENT_OAUTH_AUDIENCE", "https://api.example.com/mcp"),
        ("HELIX_AGENT_OAUTH_JWKS_URL", "https://issuer.example.com/.well-known/jwks.json"),
        ("HELIX_AGENT_OAUTH_PROVIDER", "auth0"),
        ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
        ("TRUST_PROXY", "apigateway"),
    ];
    const DEV: &[(&str, &str)] =
        &[("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"), ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef")];

    fn with(
        base: &[(&'static str, &'static str)],
        extra: &[(&'static str, &'static str)],
    ) -> Vec<(&'static str, &'static str)> {
        base.iter().chain(extra).copied().collect()
    }

    #[test]
    fn development_hosts_the_dev_provider_at_the_public_base_url() {
        let c = cfg(DefaultMode::Development, DEV).unwrap();
        assert!(c.browser.dev_provider);
        let oidc = c.browser.oidc.unwrap();
        assert_eq!(oidc.issuer, "http://127.0.0.1:9000/dev-oidc");
        assert_eq!(oidc.algorithms, vec!["EdDSA"]);
        assert_eq!(c.browser.public_origin, "http://127.0.0.1:9000");
        assert!(!c.browser.secure_cookies);
        assert!(c.browser.session_idle <= c.browser.session_absolute);
    }

    #[test]
    fn production_without_browser_settings_has_no_sign_in_and_refuses_the_dev_provider() {
        let c = cfg(DefaultMode::Production, PROD).unwrap();
        assert!(c.browser.oidc.is_none() && !c.browser.dev_provider && c.browser.secure_cookies);
        let e = cfg(DefaultMode::Production, &with(PROD, &[("HELIX_BROWSER_DEV_PROVIDER", "1")])).unwrap_err();
        assert!(matches!(e, ConfigError::UnsafeProduction(_)), "{e}");
    }

    #[test]
    fn production_refuses_incomplete_or_unsafe_browser_settings() {
        let issuer = ("HELIX_BROWSER_OIDC_ISSUER", "https://issuer.example.com/");
        let id = ("HELIX_BROWSER_OIDC_CLIENT_ID", "web");
        let secret = ("HELIX_BROWSER_OIDC_CLIENT_SECRET", "0123456789abcdef");
        let e = |extra: &[(&'static str, &'static str)]| cfg(DefaultMode::Production, &with(PROD, extra)).unwrap_err();
        assert_eq!(e(&[issuer]), ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_ID"));
        assert_eq!(e(&[id, secret]), ConfigError::Missing("HELIX_BROWSER_OIDC_ISSUER"));
        assert_eq!(e(&[secret]), ConfigError::Missing("HELIX_BROWSER_OIDC_ISSUER"));
        assert_eq!(e(&[issuer, id]), ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_SECRET"));
        assert!(matches!(
            e(&[("HELIX_BROWSER_OIDC_ISSUER", "http://issuer.example.com/"), id, secret]),
            ConfigError::UnsafeProduction(_)
        ));
        assert!(matches!(
            e(&[("HELIX_BROWSER_OIDC_ISSUER", "https://other.example.com/"), id, secret]),
            ConfigError::UnsafeProduction(_)
        ));
        assert!(matches!(
            e(&[issuer, id, secret, ("HELIX_BROWSER_OIDC_ALGORITHMS", "HS256")]),
            ConfigError::Malformed { .. }
        ));
        let c = cfg(DefaultMode::Production, &with(PROD, &[issuer, id, secret])).unwrap();
        let oidc = c.browser.oidc.unwrap();
        assert_eq!((oidc.issuer.as_str(), oidc.algorithms), ("https://issuer.example.com/", vec!["RS256".to_owned()]));
        assert!(!format!("{:?}", oidc.client_secret).contains("0123456789abcdef"), "the secret is redacted");
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert_eq!(origin_of("https://API.example.com/base/path").as_deref(), Some("https://api.example.com"));
        assert_eq!(origin_of("http://127.0.0.1:9000").as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(origin_of("ftp://x"), None);
        assert_eq!(origin_of("https://user@x"), None);
    }
}
