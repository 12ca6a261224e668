//! The local server: development config overlay (generated HS256 secret and
//! terminal signer in the data dir), store choice, local executor, composed routers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use helix_core::config::{Config, DefaultMode, ExecutorConfig, Mode};
use helix_core::domain::authority::TerminalSigner;
use helix_core::domain::random_hex;
use helix_core::executor::TurnExecutor;
use helix_core::executor::local::LocalExecutor;
use helix_core::http::AppState;
use helix_core::http::oauth::dev_auth::{self, DevAuthKey};
use helix_core::http::oauth::dev_routes;
use helix_core::service::accounts::LinkIdentity;
use helix_core::store::Store;

use crate::dev_control::{self, ControlRequest, mint};
use crate::{AccountArgs, StoreArgs, StoreKind, require_table};

pub const DEV_SUBJECT: &str = "dev-user";
pub const DEV_TENANT: &str = "dev-tenant";
const SIGNER_ISSUER: &str = "helix-local-executor";
const SIGNER_KEY_ID: &str = "local-1";
const DEV_ISSUER_KEY_FILE: &str = "dev-issuer-es256.key";

/// Reads (or creates, 0600) a secret file in the data dir. Creation is atomic (a
/// complete temp file hard-linked into place), so concurrent `serve` and `dev-token`
/// agree on one value and never read a half-written file.
fn secret_file(dir: &Path, name: &str, make: impl FnOnce() -> String) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(name);
    if let Ok(s) = std::fs::read_to_string(&path) {
        return Ok(s.trim().to_owned());
    }
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    {
        use std::io::Write;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(make().as_bytes())?;
        f.sync_all()?;
    }
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
    }
    Ok(std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?.trim().to_owned())
}

/// The logical data scopes `helix serve` enables unless `HELIX_AGENT_DATABASE_SCOPES` is set.
pub const LOCAL_DATA_SCOPES: &str = "research_library,bound_room_evidence,bound_room_environment_probe";

/// Development configuration: the process environment, overlaid with local defaults.
fn local_config(data_dir: &Path, addr: Option<SocketAddr>) -> anyhow::Result<Config> {
    let secret = secret_file(data_dir, "local-hs256.secret", || random_hex(32))?;
    let base = addr.map(|a| format!("http://{a}"));
    // `helix serve` on loopback hosts the development issuer: its tokens verify through
    // the JWKS path (ES256); the local HS256 secret stays for `helix dev-token`.
    let jwks = addr.filter(|a| a.ip().is_loopback()).map(|a| format!("http://{a}{}", dev_auth::JWKS_PATH));
    // One issuer for people and agents: the base URL, as the development issuer signs;
    // its tokens are for the canonical resource, `{base}/mcp`.
    let issuer = jwks.as_ref().and(base.clone());
    let servers = issuer.clone();
    let lookup = move |name: &str| -> Option<String> {
        std::env::var(name).ok().or_else(|| match name {
            "HELIX_AGENT_ALLOW_LOCAL_HS256" => Some("1".into()),
            "HELIX_AGENT_LOCAL_JWT_SECRET" => Some(secret.clone()),
            // Every logical data scope the local server can serve, so every walkthrough (live
            // rooms, bound-room evidence, the probe) runs against the one `helix serve`; a run
            // still asks for each scope and is checked for it.
            "HELIX_AGENT_DATABASE_SCOPES" => Some(LOCAL_DATA_SCOPES.into()),
            "CASIMIR_PUBLIC_BASE_URL" => base.clone(),
            "HELIX_AGENT_OAUTH_JWKS_URL" => jwks.clone(),
            "HELIX_AGENT_OAUTH_ALGORITHMS" => jwks.as_ref().map(|_| "ES256".into()),
            // The protected-resource metadata names the development issuer (the base URL).
            "HELIX_AGENT_OAUTH_AUTHORIZATION_SERVERS" => servers.clone(),
            _ => None,
        })
    };
    let mut config = Config::from_lookup(DefaultMode::Development, &lookup)?;
    // The development issuer signs with the base URL and the canonical resource; its tokens
    // stand for the configured issuer, which `helix dev-token` (knowing no port) also uses:
    // one identity, one agent binding, whichever way the token was obtained.
    let own_keys = std::env::var("HELIX_AGENT_OAUTH_JWKS_URL").is_err();
    if let Some(base) = issuer.filter(|_| own_keys) {
        config.oauth.jwks_identity = Some((base, config.resource.clone()));
    }
    Ok(config)
}

const PRODUCTION_REFUSAL: &str = "refused: HELIX_ENV=production; the development authorization server, development tokens and the local server are nonproduction paths (deploy the functions with a real authorization server)";

fn refuse_production(config: &Config) -> anyhow::Result<()> {
    if config.mode == Mode::Production {
        bail!(PRODUCTION_REFUSAL);
    }
    Ok(())
}

async fn open_store(args: &StoreArgs) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match args.store {
        StoreKind::Embedded => {
            std::fs::create_dir_all(&args.data_dir)?;
            let path = args.data_dir.join("helix.redb");
            owner_only(&path)?;
            Arc::new(
                helix_core::store::embedded::EmbeddedStore::open(&path)
                    .with_context(|| format!("opening {} (is another helix serve using it?)", path.display()))?,
            )
        }
        StoreKind::Dynamodb => Arc::new(helix_core::store::dynamo::DynamoStore::from_env(require_table(args)?).await),
    })
}

/// Creates `path` owner-only (0600) when it is missing and tightens it when it exists:
/// the store holds run data and receipts, and is kept like the secrets beside it.
fn owner_only(path: &Path) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path).with_context(|| format!("creating {}", path.display()))?;
    #[cfg(unix)]
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .with_context(|| format!("restricting {}", path.display()))?;
    Ok(())
}

fn local_signer(data_dir: &Path) -> anyhow::Result<TerminalSigner> {
    let seed_hex = secret_file(data_dir, "terminal-signer.seed", || random_hex(32))?;
    let seed: [u8; 32] = hex_seed(&seed_hex).context("terminal-signer.seed is not 32 hex bytes")?;
    Ok(TerminalSigner::from_seed(SIGNER_ISSUER, SIGNER_KEY_ID, seed))
}

fn hex_seed(s: &str) -> Option<[u8; 32]> {
    hex_bytes(s)?.try_into().ok()
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The development issuer's ES256 key: generated once into the data dir (0600, PKCS#8
/// as hex), so tokens it signed stay valid across restarts.
pub fn dev_issuer_key(data_dir: &Path) -> anyhow::Result<DevAuthKey> {
    let hex = secret_file(data_dir, DEV_ISSUER_KEY_FILE, || {
        DevAuthKey::generate_pkcs8().iter().map(|b| format!("{b:02x}")).collect()
    })?;
    let der = hex_bytes(&hex).with_context(|| format!("{DEV_ISSUER_KEY_FILE} is not hex"))?;
    DevAuthKey::from_pkcs8(&der).map_err(|e| anyhow::anyhow!("{DEV_ISSUER_KEY_FILE}: {e}"))
}

fn executor(config: &mut Config, data_dir: &Path, corpus: Option<PathBuf>) -> anyhow::Result<Arc<dyn TurnExecutor>> {
    let ExecutorConfig::Local { corpus_dir } = &config.executor else {
        return Ok(helix_core::wiring::configured_executor(config));
    };
    let signer = local_signer(data_dir)?;
    config.trusted_terminal_keys.insert(SIGNER_ISSUER, SIGNER_KEY_ID, signer.verifying_key());
    let exec = match corpus.or_else(|| corpus_dir.clone()) {
        Some(dir) => {
            LocalExecutor::from_dir(&dir, signer).with_context(|| format!("reading corpus {}", dir.display()))?
        }
        None => LocalExecutor::bundled(signer),
    };
    Ok(Arc::new(exec))
}

/// All routers of all functions on one port.
pub fn compose(state: AppState) -> axum::Router {
    helix_agent_runs::routes(state.clone())
        .merge(helix_discovery::routes(state.clone()))
        .merge(helix_mcp::routes(state.clone()))
        .merge(helix_account::routes(state.clone()))
        .merge(helix_rooms::routes(state.clone()))
        .merge(helix_ingress::routes(state.clone()))
        .fallback_service(helix_core::http::fallback_router(state))
}

/// The development issuer (people's sign-in and agents' authorization server), hosted
/// only in development and only on loopback.
fn with_dev_provider(
    app: axum::Router,
    state: &AppState,
    addr: SocketAddr,
    data_dir: &Path,
) -> anyhow::Result<axum::Router> {
    if !addr.ip().is_loopback() {
        if state.services.config.browser.dev_provider {
            bail!(
                "refused: the development issuer (sign-in and the agents' authorization server) is served only on a loopback address (set HELIX_BROWSER_DEV_PROVIDER=0 or bind 127.0.0.1)"
            );
        }
        return Ok(app);
    }
    let key = Arc::new(dev_issuer_key(data_dir)?);
    Ok(match dev_routes::router(state.clone(), key) {
        Some(issuer) => issuer.merge(app),
        None => app,
    })
}

pub async fn serve(addr: SocketAddr, args: &StoreArgs, corpus: Option<PathBuf>) -> anyhow::Result<()> {
    // Bound first, so the public base URL (and the browser lane's issuer and redirect URI
    // derived from it) names the real port even for --addr 127.0.0.1:0.
    // Before the configuration is read: in production it would refuse for a lesser reason.
    if std::env::var("HELIX_ENV").is_ok_and(|e| e == "production") {
        bail!(PRODUCTION_REFUSAL);
    }
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    let addr = listener.local_addr()?;
    let mut config = local_config(&args.data_dir, Some(addr))?;
    refuse_production(&config)?;
    let store = open_store(args).await?;
    let executor = executor(&mut config, &args.data_dir, corpus)?;
    let state = helix_core::wiring::app_state(config, store, executor);
    let token = mint(&state, DEV_SUBJECT, DEV_TENANT, &default_scopes(), 12 * 3600).await?;

    let limits = state.services.config.server;
    let mut app = with_dev_provider(compose(state.clone()), &state, addr, &args.data_dir)?;
    let url = format!("http://{addr}");
    // `helix dev-token`, `dev-session` and `account policy` ask this server while it runs
    // (development, loopback only; the file goes when the server stops).
    let mut _control_file = None;
    if addr.ip().is_loopback() {
        let (control, guard) = dev_control::mount(state.clone(), &args.data_dir, &url)?;
        app = control.merge(app);
        _control_file = Some(guard);
    }
    println!("Helix Agent API (development, {} store) listening on {url}", store_name(args));
    println!("Development bearer token (subject {DEV_SUBJECT}, tenant {DEV_TENANT}, valid 12 h):");
    println!("  export HELIX_TOKEN='{token}'");
    println!("Try:");
    println!("  curl -s -X POST {url}/api/v1/agent-runs -H \"Authorization: Bearer $HELIX_TOKEN\" \\");
    println!("    -H 'Idempotency-Key: first-run-0001' -H 'Content-Type: application/json' \\");
    println!(
        "    -d '{{\"objective\":\"What force did Lamoreaux measure between a sphere and a plate?\",\"database_scope\":[\"research_library\"]}}'"
    );
    println!("MCP endpoint: {url}/mcp   Metadata: {url}/.well-known/oauth-protected-resource/mcp");
    println!("Sign in and manage agent access: {url}/account   Connect an agent: {url}/agent-access");
    println!(
        "Limits: header read {:?}, idle {:?}, body read {:?}, {} connections (HELIX_SERVE_*)",
        limits.header_read_timeout, limits.idle_timeout, limits.body_read_timeout, limits.max_connections
    );
    helix_core::http::server::serve(listener, app, limits, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    // The last spans (the requests that finished during shutdown) reach the collector.
    let _ = tokio::task::spawn_blocking(helix_core::telemetry::shutdown).await;
    Ok(())
}

fn store_name(args: &StoreArgs) -> &'static str {
    match args.store {
        StoreKind::Embedded => "embedded",
        StoreKind::Dynamodb => "DynamoDB",
    }
}

fn default_scopes() -> Vec<String> {
    [
        "helix.agent_runs.read",
        "helix.agent_runs.write",
        "helix.data.research_library.read",
        "helix.rooms.read",
        "helix.rooms.manage",
    ]
    .map(String::from)
    .to_vec()
}

pub async fn dev_token(
    args: &StoreArgs,
    subject: &str,
    tenant: &str,
    scopes: &[String],
    ttl: i64,
) -> anyhow::Result<String> {
    let config = local_config(&args.data_dir, None)?;
    refuse_production(&config)?;
    dev_control::check_ttl(ttl)?;
    let request = ControlRequest::Token {
        subject: subject.to_owned(),
        tenant: tenant.to_owned(),
        scopes: scopes.to_vec(),
        ttl_seconds: ttl,
    };
    if let Some(answer) = dev_control::ask(&args.data_dir, &request).await? {
        return answer.secret.context("the running helix serve sent no token");
    }
    let store = open_store(args).await?;
    let state = helix_core::wiring::app_state(config, store, Arc::new(helix_core::executor::Unconfigured));
    mint(&state, subject, tenant, scopes, ttl).await
}

pub async fn link_account(
    args: &StoreArgs,
    issuer: &str,
    tenant: &str,
    provider: &str,
    subject: &str,
) -> anyhow::Result<()> {
    let config = local_config(&args.data_dir, None)?;
    let store = open_store(args).await?;
    let state = helix_core::wiring::app_state(config, store, Arc::new(helix_core::executor::Unconfigured));
    let (account, status) =
        state.services.accounts.link_account(&LinkIdentity { issuer, tenant, provider, subject }).await?;
    let status = match status {
        helix_core::service::accounts::BindingStatus::Active => "active",
        helix_core::service::accounts::BindingStatus::Revoked => "revoked (not reactivated)",
    };
    println!("linked account {account}; agent binding {status}");
    Ok(())
}

/// Prints nothing but the cookie value: the session of this identity's account.
pub async fn dev_session(args: &StoreArgs, subject: &str, tenant: &str) -> anyhow::Result<String> {
    let config = local_config(&args.data_dir, None)?;
    refuse_production(&config)?;
    let request = ControlRequest::Session { subject: subject.to_owned(), tenant: tenant.to_owned() };
    if let Some(answer) = dev_control::ask(&args.data_dir, &request).await? {
        return answer.secret.context("the running helix serve sent no session");
    }
    let store = open_store(args).await?;
    let state = helix_core::wiring::app_state(config, store, Arc::new(helix_core::executor::Unconfigured));
    let o = &state.services.config.oauth;
    let id = LinkIdentity { issuer: &o.issuer, tenant, provider: &o.provider, subject };
    Ok(state.services.accounts.dev_session(&id).await?.expose().to_owned())
}

async fn operator_state(args: &AccountArgs) -> anyhow::Result<AppState> {
    let config = local_config(&args.store.data_dir, None)?;
    let store = open_store(&args.store).await?;
    Ok(helix_core::wiring::app_state(config, store, Arc::new(helix_core::executor::Unconfigured)))
}

fn provider_of(state: &AppState, args: &AccountArgs) -> String {
    args.provider.clone().unwrap_or_else(|| state.services.config.oauth.provider.clone())
}

pub async fn account_show(args: &AccountArgs) -> anyhow::Result<()> {
    let state = operator_state(args).await?;
    let provider = provider_of(&state, args);
    let view = match state.services.accounts.show_account(&provider, &args.subject).await {
        Err(helix_core::error::ApiError::NotFound) => bail!("no account is linked for this provider and subject"),
        other => other?,
    };
    // The binding of exactly this (issuer, tenant, provider, subject), if any.
    let issuer = args.issuer.clone().unwrap_or_else(|| state.services.config.oauth.issuer.clone());
    let tenant_ref = helix_core::domain::account::tenant_ref(&issuer, &args.tenant);
    let this = view
        .bindings
        .bindings
        .iter()
        .find(|b| b.tenant_ref == tenant_ref && b.issuer == issuer && b.provider == provider);
    let out = serde_json::json!({
        "account": view,
        "identity_binding": this,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

pub async fn account_policy(
    args: &AccountArgs,
    change: &helix_core::domain::account::PolicyChange,
) -> anyhow::Result<()> {
    // A running development server holds the embedded store: it applies the change.
    let config = local_config(&args.store.data_dir, None)?;
    if config.mode != Mode::Production {
        let request = ControlRequest::Policy {
            subject: args.subject.clone(),
            provider: args.provider.clone(),
            rooms_locked: change.rooms_locked,
            developer: change.developer,
            guest: change.guest,
            denied_capabilities: change.denied_capabilities.clone(),
        };
        if let Some(answer) = dev_control::ask(&args.store.data_dir, &request).await? {
            let policy = answer.policy.context("the running helix serve sent no policy")?;
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "policy": policy }))?);
            return Ok(());
        }
    }
    let state = operator_state(args).await?;
    let provider = provider_of(&state, args);
    let policy = match state.services.accounts.set_policy(&provider, &args.subject, change).await {
        Err(helix_core::error::ApiError::NotFound) => bail!("no account is linked for this provider and subject"),
        other => other?,
    };
    println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "policy": policy }))?);
    Ok(())
}
