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
    crate::cold_start::mark("main");
    let directives = std::env::var("RUST_LOG").unwrap_or_default();
    let service = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "helix".into());
    let provider = crate::telemetry::provider_from_env(&service);
    if subscriber(&directives, json, std::io::stdout, provider.as_ref()).try_init().is_ok()
        && let Some(provider) = provider
    {
        crate::telemetry::install(provider);
    }
    crate::http::server::install_panic_hook();
    crate::cold_start::mark("tracing");
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
    // The store's client spans only when they are exported: otherwise nothing reads them
    // but every line logged inside a store call, which would repeat their fields.
    let no_store_spans = traces.is_none().then(|| {
        tracing_subscriber::filter::Targets::new()
            .with_default(tracing_subscriber::filter::LevelFilter::TRACE)
            .with_target(crate::store::SPANS_TARGET, tracing_subscriber::filter::LevelFilter::OFF)
    });
    let base = tracing_subscriber::registry()
        .with(env)
        .with(log_ceiling())
        .with(no_store_spans)
        .with(traces.map(crate::telemetry::layer));
    if json { Box::new(base.with(fmt.json())) } else { Box::new(base.with(fmt.compact())) }
}

pub use crate::telemetry::OWN_CRATES;

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

/// The executor the configuration names. `Local` is wired by the CLI (which owns the
/// sample corpus and the persisted signer) or, in a development Lambda, by
/// [`lambda_executor`]; here it is refused as unconfigured.
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

/// Why a function did not start. Its `Debug` is its message: a Lambda `main` that returns
/// it prints `Error: {:?}`, and an operator reads the variable that is wrong, not a variant.
#[derive(thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[cfg(feature = "dynamodb")]
    #[error(transparent)]
    TrustStore(#[from] crate::aws_sdk::TrustStoreError),
    #[error("HELIX_TABLE_NAME is required for the DynamoDB store")]
    NoTable,
    /// A corpus directory that cannot be read, with the variable that named it.
    #[cfg(feature = "local-executor")]
    #[error("{var}: {source}")]
    Corpus { var: &'static str, source: crate::executor::local::CorpusError },
}

impl std::fmt::Debug for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
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
    let service = crate::solver::TurnService::from_config(&config, signer)
        .map_err(|source| BootError::Corpus { var: "HELIX_SOLVER_CORPUS_DIR", source })?;
    tracing::info!(issuer, key_id, documents = service.document_count(), "turn service ready");
    Ok(Arc::new(service))
}

/// A Lambda function's typed configuration: production defaults, secrets from the store.
pub async fn lambda_config() -> Result<Config, BootError> {
    Ok(Config::from_env_and_secret_store(crate::config::DefaultMode::Production).await?)
}

/// The issuer and key id of a development Lambda's local solver signer.
pub const LAMBDA_LOCAL_SIGNER: (&str, &str) = ("helix-local-executor", "lambda-local");

/// A Lambda function's executor. In development with `HELIX_LOCAL_CORPUS_DIR` (and no
/// `HELIX_ASK_ENDPOINT`), the local solver over that corpus, as `helix serve` runs it: its
/// signer is generated for this process and trusted by it alone (the function that runs
/// a turn is the one that verifies its terminal candidate). Production never gets here
/// (the config has no `Local` executor in production); without a corpus directory a
/// Lambda has no solver (`executor_unavailable`), as before.
pub fn lambda_executor(config: &mut Config) -> Result<Arc<dyn TurnExecutor>, BootError> {
    #[cfg(feature = "local-executor")]
    if let (crate::config::Mode::Development, ExecutorConfig::Local { corpus_dir: Some(dir) }) =
        (config.mode, &config.executor)
    {
        let (issuer, key_id) = LAMBDA_LOCAL_SIGNER;
        let signer = crate::domain::authority::TerminalSigner::generate(issuer, key_id);
        let key = signer.verifying_key();
        let exec = crate::executor::local::LocalExecutor::from_dir(dir, signer)
            .map_err(|source| BootError::Corpus { var: "HELIX_LOCAL_CORPUS_DIR", source })?;
        tracing::info!(documents = exec.document_count(), "local solver over HELIX_LOCAL_CORPUS_DIR (development)");
        config.trusted_terminal_keys.insert(issuer, key_id, key);
        return Ok(Arc::new(exec));
    }
    Ok(configured_executor(config))
}

/// Lambda cold start of a function that must not touch the table (discovery):
/// production defaults, no SDK client, a store that refuses every call.
pub fn lambda_state_without_store() -> Result<AppState, BootError> {
    let config = Config::from_env(crate::config::DefaultMode::Production)?;
    crate::cold_start::mark("config");
    let state = app_state(config, Arc::new(crate::store::NoStore), Arc::new(Unconfigured));
    crate::cold_start::mark("state");
    Ok(state)
}

/// Lambda cold start: production defaults, DynamoDB store, configured executor.
#[cfg(feature = "dynamodb")]
pub async fn lambda_state() -> Result<AppState, BootError> {
    let mut config = lambda_config().await?;
    crate::cold_start::mark("config");
    let table = config.table_name.clone().ok_or(BootError::NoTable)?;
    crate::aws_sdk::check_trust_store()?;
    let executor = lambda_executor(&mut config)?;
    let store = Arc::new(crate::store::dynamo::DynamoStore::from_env(table).await);
    crate::cold_start::mark("sdk_clients");
    let state = app_state(config, store, executor);
    crate::cold_start::mark("state");
    Ok(state)
}

#[cfg(all(test, feature = "local-executor"))]
mod tests {
    use std::collections::HashMap;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::config::DefaultMode;
    use crate::domain::turn::TurnFailure;
    use crate::executor::local::tests::request;

    fn lambda_config(vars: &[(&str, &str)]) -> Config {
        let mut map: HashMap<String, String> = [
            ("HELIX_ENV", "development"),
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        map.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        // The Lambda default mode: HELIX_ENV=development is what makes it a development function.
        Config::from_lookup(DefaultMode::Production, &move |k| map.get(k).cloned()).unwrap()
    }

    fn corpus() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../corpus").to_owned()
    }

    #[tokio::test]
    async fn a_development_lambda_runs_the_local_solver_over_helix_local_corpus_dir() {
        let dir = corpus();
        let mut config = lambda_config(&[("HELIX_LOCAL_CORPUS_DIR", &dir)]);
        let exec = lambda_executor(&mut config).unwrap();
        let req = request("What force did Lamoreaux measure between a sphere and a plate?", None, vec![]);
        let artifact = exec.execute(req, CancellationToken::new()).await.expect("the local solver answers");
        let candidate = artifact.terminal_candidate.expect("a signed terminal candidate");
        let (issuer, key_id) = LAMBDA_LOCAL_SIGNER;
        assert_eq!((candidate.issuer.as_str(), candidate.key_id.as_str()), (issuer, key_id));
        // The function trusts its own signer: the candidate verifies for its run, step and claim.
        let refs = candidate.supporting_refs.clone();
        config.trusted_terminal_keys.verify(&candidate, "run_localtest01", 1, "claim-abc", &refs).unwrap();
    }

    #[tokio::test]
    async fn without_a_corpus_dir_a_lambda_has_no_solver() {
        let mut config = lambda_config(&[]);
        let exec = lambda_executor(&mut config).unwrap();
        let err = exec.execute(request("anything", None, vec![]), CancellationToken::new()).await.unwrap_err();
        assert!(matches!(err, TurnFailure::ExecutorUnavailable));
        assert!(config.trusted_terminal_keys.is_empty());
    }

    #[test]
    fn a_start_error_prints_its_message_when_main_returns_it() {
        let err: Box<dyn std::error::Error + Send + Sync> = BootError::NoTable.into();
        assert_eq!(format!("Error: {err:?}"), "Error: HELIX_TABLE_NAME is required for the DynamoDB store");
        let trust = BootError::from(crate::aws_sdk::TrustStoreError("/nonexistent/ca.crt".into()));
        assert_eq!(format!("{trust:?}"), "SSL_CERT_FILE names no file: /nonexistent/ca.crt");
    }

    #[test]
    fn an_unreadable_corpus_dir_fails_start_with_its_variable() {
        let mut config = lambda_config(&[("HELIX_LOCAL_CORPUS_DIR", "/nonexistent/helix-corpus")]);
        let err = lambda_executor(&mut config).err().expect("refused");
        assert!(err.to_string().starts_with("HELIX_LOCAL_CORPUS_DIR"), "{err}");
    }

    fn store_span_made(traces: Option<&opentelemetry_sdk::trace::SdkTracerProvider>) -> bool {
        let subscriber = subscriber("info", false, std::io::sink, traces);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "helix_core::store::spans", "redb.get");
            let request = tracing::info_span!("request");
            assert!(!request.is_disabled(), "other spans are made either way");
            !span.is_disabled()
        })
    }

    #[test]
    fn store_spans_are_made_only_when_spans_are_exported() {
        assert_eq!(crate::store::SPANS_TARGET, "helix_core::store::spans");
        assert!(!store_span_made(None));
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        assert!(store_span_made(Some(&provider)));
    }
}
