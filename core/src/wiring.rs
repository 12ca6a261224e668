//! Building the shared state from configuration: store, executor, HTTP state.
//! Function binaries and the CLI call these; nothing here holds rules.

use std::sync::Arc;

use crate::config::{Config, ExecutorConfig};
use crate::executor::{TurnExecutor, Unconfigured};
use crate::http::AppState;
use crate::service::Services;
use crate::store::Store;

/// Tracing for every binary: JSON lines on Lambda, compact text locally; `RUST_LOG` filters
/// (default `info`) under the fixed [`log_ceiling`].
pub fn init_tracing(json: bool) {
    use tracing_subscriber::util::SubscriberInitExt;
    let directives = std::env::var("RUST_LOG").unwrap_or_default();
    let _ = log_subscriber(&directives, json, std::io::stdout).try_init();
    crate::http::server::install_panic_hook();
}

/// The subscriber [`init_tracing`] installs, writing to `writer` (tests capture it).
/// `directives` is a `RUST_LOG` value; empty or malformed means `info`.
pub fn log_subscriber<W>(directives: &str, json: bool, writer: W) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    let env = tracing_subscriber::EnvFilter::try_new(directives)
        .ok()
        .filter(|_| !directives.trim().is_empty())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: a log file or collector gets plain text.
    let ansi = !json && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let fmt = tracing_subscriber::fmt::layer().with_target(false).with_ansi(ansi).with_writer(writer);
    let base = tracing_subscriber::registry().with(env).with(log_ceiling());
    if json { Box::new(base.with(fmt.json())) } else { Box::new(base.with(fmt.compact())) }
}

/// The most any `RUST_LOG` can enable. Dependencies write request data at debug and
/// trace: rmcp every JSON-RPC message (tool arguments and results, idempotency keys
/// verbatim), the AWS SDK its signed requests, hyper and h2 their frames. Helix's own
/// crates never log credentials, keys or arguments at any level and follow `RUST_LOG`;
/// every other target stops at `info`, and rmcp (whose `info` lines carry client
/// notifications verbatim) at `warn`. A second global filter, so no directive lifts it.
pub fn log_ceiling() -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::LevelFilter;
    tracing_subscriber::filter::Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("rmcp", LevelFilter::WARN)
        .with_target("helix", LevelFilter::TRACE)
        .with_target("helix_core", LevelFilter::TRACE)
        .with_target("helix_agent_runs", LevelFilter::TRACE)
        .with_target("helix_discovery", LevelFilter::TRACE)
        .with_target("helix_mcp", LevelFilter::TRACE)
        .with_target("helix_account", LevelFilter::TRACE)
        .with_target("helix_solver", LevelFilter::TRACE)
}

/// The executor the configuration names. `Local` is wired by the CLI, which owns
/// the corpus and the signer; elsewhere it is refused as unconfigured.
pub fn configured_executor(config: &Config) -> Arc<dyn TurnExecutor> {
    match &config.executor {
        ExecutorConfig::Http { endpoint, bearer } => {
            Arc::new(crate::executor::http::HttpExecutor::new(endpoint.clone()).with_bearer(bearer.clone()))
        }
        ExecutorConfig::Local { .. } | ExecutorConfig::None => Arc::new(Unconfigured),
    }
}

pub fn app_state(config: Config, store: Arc<dyn Store>, executor: Arc<dyn TurnExecutor>) -> AppState {
    AppState::new(Services::new(config, store, executor))
}

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("HELIX_TABLE_NAME is required for the DynamoDB store")]
    NoTable,
    #[cfg(feature = "local-executor")]
    #[error(transparent)]
    Corpus(#[from] crate::executor::local::CorpusError),
}

/// The solver function's cold start: production defaults, its bearer and signing key from
/// the secret store (`HELIX_ASK_BEARER_TOKEN_SECRET_ARN`, `HELIX_SOLVER_SIGNING_KEY_SECRET_ARN`),
/// its corpus bundled or from `HELIX_SOLVER_CORPUS_DIR`.
#[cfg(feature = "local-executor")]
pub async fn solver_service() -> Result<Arc<crate::solver::TurnService>, BootError> {
    use crate::config::{ConfigError, DefaultMode, SIGNING_KEY_VAR, SolverConfig};
    let lookup = crate::config::env_and_secret_store().await?;
    let mut config = SolverConfig::from_lookup(DefaultMode::Production, &lookup)?;
    let signer = config.signer.take().ok_or(ConfigError::Missing(SIGNING_KEY_VAR))?;
    let (issuer, key_id) = (signer.issuer.clone(), signer.key_id.clone());
    let service = crate::solver::TurnService::from_config(&config, signer)?;
    tracing::info!(issuer, key_id, documents = service.document_count(), "turn service ready");
    Ok(Arc::new(service))
}

/// A Lambda function's typed configuration: production defaults, secrets from the store.
pub async fn lambda_config() -> Result<Config, BootError> {
    Ok(Config::from_env_and_secret_store(crate::config::DefaultMode::Production).await?)
}

/// Lambda cold start of a function that must not touch the table (discovery):
/// production defaults, no SDK client, a store that refuses every call.
pub fn lambda_state_without_store() -> Result<AppState, BootError> {
    let config = Config::from_env(crate::config::DefaultMode::Production)?;
    Ok(app_state(config, Arc::new(crate::store::NoStore), Arc::new(Unconfigured)))
}

/// Lambda cold start: production defaults, DynamoDB store, configured executor.
#[cfg(feature = "dynamodb")]
pub async fn lambda_state() -> Result<AppState, BootError> {
    let config = lambda_config().await?;
    let table = config.table_name.clone().ok_or(BootError::NoTable)?;
    let store = Arc::new(crate::store::dynamo::DynamoStore::from_env(table).await);
    let executor = configured_executor(&config);
    Ok(app_state(config, store, executor))
}
