//! Building the shared state from configuration: store, executor, HTTP state.
//! Function binaries and the CLI call these; nothing here holds rules.

use std::sync::Arc;

use crate::config::{Config, ExecutorConfig};
use crate::executor::{TurnExecutor, Unconfigured};
use crate::http::AppState;
use crate::service::Services;
use crate::store::Store;

/// Tracing for every binary: JSON lines on Lambda, compact text locally; `RUST_LOG` filters.
pub fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let _ = if json { builder.json().try_init() } else { builder.compact().try_init() };
    crate::http::server::install_panic_hook();
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
