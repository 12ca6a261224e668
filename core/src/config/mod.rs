//! The one typed configuration, read once at cold start. Nothing else reads the
//! environment. A missing or malformed variable fails with its name; production
//! fails closed on incomplete OAuth, HS256, or plain-HTTP public origins.
//!
//! One file per concern (OAuth, the browser lane, the proxy in front, lane limits,
//! the executor); the steps here run them in order. Depends on no other module of
//! the crate but the domain's trusted keys and the observer lane's snapshot bound.

mod browser;
#[cfg(test)]
mod doc_table;
mod env;
mod executor;
mod limits;
mod oauth;
mod proxy;
mod secret;
#[cfg(feature = "secret-store")]
pub mod secret_store;
mod solver;

use std::time::Duration;

pub use browser::{BrowserConfig, DEV_PROVIDER_CLIENT_ID, DEV_PROVIDER_PATH, OidcConfig, origin_of};
pub use executor::ExecutorConfig;
pub use limits::{CONNECTOR_LIMITS, EmbodimentConfig, Limits, ServerLimits, SourceConfig};
pub use oauth::{LOCAL_AUDIENCE, LOCAL_ISSUER, OAuthConfig};
pub use proxy::TrustProxy;
pub use secret::Secret;
pub use solver::{SIGNING_KEY_VAR, SolverConfig};

use crate::domain::approval::{APPROVAL_KEYS_VAR, ApprovalKeys};
use crate::domain::authority::TrustedKeys;
use env::Env;
use executor::executor;
use limits::{embodiment, limits, server_limits, sources};
use oauth::{algorithms, local_hs256, mcp_url, oauth, public_base_url, resource};
use proxy::{hosts_and_origins, trust_proxy};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Production,
    Development,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub public_base_url: String,
    /// The protected resource the metadata names: the configured audience (see `resource`).
    pub resource: String,
    /// The MCP URL the agent-access page gives clients (`HELIX_AGENT_MCP_URL`, else the
    /// resource): the MCP function URL where that function is its own public origin.
    pub mcp_url: String,
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
    /// Player embodiment: queue time before `expired`, the step deadline.
    pub embodiment: EmbodimentConfig,
    pub table_name: Option<String>,
    pub executor: ExecutorConfig,
    pub trusted_terminal_keys: TrustedKeys,
    /// Helix account profiles (`acct_...`) admitted to developer privileges in production
    /// (`HELIX_DEVELOPER_PROFILE_ALLOWLIST`); empty admits none. Unused in development.
    pub developer_profiles: Vec<String>,
    /// The runtime approval hosts' public keys; empty: no approval host (fails closed).
    pub approval_keys: ApprovalKeys,
    pub browser: BrowserConfig,
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
    #[cfg(feature = "secret-store")]
    #[error(transparent)]
    SecretStore(#[from] secret_store::SecretStoreError),
}

fn malformed(name: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Malformed { name, problem: problem.into() }
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

    /// The cold start of a deployed function: every `<VAR>_SECRET_ARN` read from the secret
    /// store once (see [`secret_store`]), then the environment. Without the feature, the
    /// environment alone.
    pub async fn from_env_and_secret_store(default_mode: DefaultMode) -> Result<Self, ConfigError> {
        let lookup = env_and_secret_store().await?;
        Self::from_lookup(default_mode, &lookup)
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
        let mcp_url = mcp_url(&env, prod, &resource)?;
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
            mcp_url,
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
            // (12,000 characters), so a limit sized from those bounds admits any valid
            // request, however it is escaped.
            observer_limits: Limits {
                body_bytes: crate::domain::room::OBSERVER_BODY_MAX_BYTES,
                ..limits(
                    &env,
                    "HELIX_ROOM_AGENT_BODY_LIMIT",
                    "HELIX_AGENT_RUN_OBSERVER_IP_RATE_LIMIT",
                    "HELIX_AGENT_RUN_OBSERVER_ACCOUNT_RATE_LIMIT",
                )?
            },
            sources: sources(&env)?,
            embodiment: embodiment(&env)?,
            table_name: env.get("HELIX_TABLE_NAME"),
            executor: executor(&env, prod)?,
            trusted_terminal_keys: match env.get("HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON") {
                None => TrustedKeys::default(),
                Some(json) => TrustedKeys::from_json(&json)
                    .map_err(|p| malformed("HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON", p))?,
            },
            developer_profiles: env.list("HELIX_DEVELOPER_PROFILE_ALLOWLIST"),
            approval_keys: match env.get(APPROVAL_KEYS_VAR) {
                None => ApprovalKeys::default(),
                Some(json) => ApprovalKeys::from_json(&json).map_err(|p| malformed(APPROVAL_KEYS_VAR, p))?,
            },
        })
    }

    /// Receipt and claim lease: at least two minutes, else one minute over the turn timeout.
    pub fn lease(&self) -> Duration {
        (self.turn_timeout + Duration::from_secs(60)).max(Duration::from_secs(120))
    }
}

/// The process environment over the secret store's values (see
/// [`Config::from_env_and_secret_store`]); other typed configurations (the solver's) use it too.
pub async fn env_and_secret_store() -> Result<impl Fn(&str) -> Option<String>, ConfigError> {
    #[cfg(feature = "secret-store")]
    let secrets = secret_store::load_from_env().await?;
    Ok(move |name: &str| {
        #[cfg(feature = "secret-store")]
        if let Some(v) = secrets.get(name) {
            return Some(v);
        }
        std::env::var(name).ok()
    })
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

#[cfg(test)]
pub(crate) mod tests;
