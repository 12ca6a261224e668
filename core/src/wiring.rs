//! Building the shared state from configuration: store, executor, HTTP state.
//! Function binaries and the CLI call these; nothing here holds rules.

use std::sync::Arc;

use crate::config::{Config, ExecutorConfig};
use crate::executor::{TurnExecutor, Unconfigured};
use crate::http::AppState;
use crate::service::Services;
use crate::store::Store;

/// Tracing for every binary: JSON lines on Lambda, compact text locally; `RUST_LOG` filters
/// (default `info`) under the fixed [`log_ceiling`]. Spans are also exported by OTLP when
/// the environment asks for it (see `telemetry`); the binary then calls
/// `telemetry::shutdown` on exit (`helix serve`) or `telemetry::flush` per invocation
/// (Lambda, `lambda::run`).
pub fn init_tracing(json: bool) {
    use tracing_subscriber::util::SubscriberInitExt;
    let directives = std::env::var("RUST_LOG").unwrap_or_default();
    let service = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "helix".into());
    let provider = crate::telemetry::provider_from_env(&service);
    if subscriber(&directives, json, std::io::stdout, provider.as_ref()).try_init().is_ok()
        && let Some(provider) = provider
    {
        crate::telemetry::install(provider);
    }
    crate::http::server::install_panic_hook();
}

/// The subscriber [`init_tracing`] installs, writing to `writer` (tests capture it).
/// `directives` is a `RUST_LOG` value; empty or malformed means `info`.
pub fn log_subscriber<W>(directives: &str, json: bool, writer: W) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    subscriber(directives, json, writer, None)
}

/// [`log_subscriber`], plus the OpenTelemetry layer over `traces` when given.
pub fn subscriber<W>(
    directives: &str,
    json: bool,
    writer: W,
    traces: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) -> Box<dyn tracing::Subscriber + Send + Sync>
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
    let base = tracing_subscriber::registry().with(env).with(log_ceiling()).with(traces.map(crate::telemetry::layer));
    if json { Box::new(base.with(fmt.json())) } else { Box::new(base.with(fmt.compact())) }
}

/// Helix's own crates (targets): they follow `RUST_LOG` to `trace`, and only their spans
/// are exported as traces.
pub const OWN_CRATES: [&str; 6] =
    ["helix", "helix_core", "helix_agent_runs", "helix_discovery", "helix_mcp", "helix_account"];

/// The most any `RUST_LOG` can enable. Dependencies write request data at debug and
/// trace: rmcp every JSON-RPC message (tool arguments and results, idempotency keys
/// verbatim), the AWS SDK its signed requests, hyper and h2 their frames. Helix's own
/// crates never log credentials, keys or arguments at any level and follow `RUST_LOG`;
/// every other target stops at `info`, and rmcp (whose `info` lines carry client
/// notifications verbatim) at `warn`. A second global filter, so no directive lifts it.
pub fn log_ceiling() -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::LevelFilter;
    let ceiling = tracing_subscriber::filter::Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("rmcp", LevelFilter::WARN);
    OWN_CRATES.iter().fold(ceiling, |t, name| t.with_target(*name, LevelFilter::TRACE))
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
    let config = Config::from_env(crate::config::DefaultMode::Production)?;
    let table = config.table_name.clone().ok_or(BootError::NoTable)?;
    let store = Arc::new(crate::store::dynamo::DynamoStore::from_env(table).await);
    let executor = configured_executor(&config);
    Ok(app_state(config, store, executor))
}
