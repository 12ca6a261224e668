//! Test harness: `TestApp::spawn()` serves the composed routers of every function on
//! 127.0.0.1:0 over real HTTP, with its own store (embedded in a temp dir, or a fresh
//! DynamoDB table on the emulator the test command starts) and a scripted executor.
//! This is the core: spawning, tokens, bearer requests and reading answers. What a
//! feature adds (runs, rooms, sources, the browser lane, MCP) lives in `support`, as
//! methods on `TestApp`; test modules use those and never each other.

pub mod support;

use std::sync::Arc;

use helix_core::config::{Config, DefaultMode};
use helix_core::domain::authority::TerminalSigner;
use helix_core::executor::scripted::{ScriptedExecutor, Step};
use helix_core::http::AppState;
use helix_core::service::accounts::LinkIdentity;
use helix_core::store::Store;
use serde_json::Value;

use crate::support::faults::{Faults, FaultyStore};

pub const SECRET: &str = "test-secret-0123456789abcdef-0123456789";
pub const SIGNER_ISSUER: &str = "helix-ask-test";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Dynamo,
}

pub struct TestApp {
    pub base: String,
    pub faults: Arc<Faults>,
    pub state: AppState,
    pub executor: Arc<ScriptedExecutor>,
    pub http: reqwest::Client,
    /// The development issuer's signing key (its JWKS is served at `dev_auth::JWKS_PATH`).
    pub dev_key: Arc<helix_core::http::dev_auth::DevAuthKey>,
    _dir: tempfile::TempDir,
}

pub fn compose(state: AppState) -> axum::Router {
    let key =
        helix_core::http::dev_auth::DevAuthKey::from_pkcs8(&helix_core::http::dev_auth::DevAuthKey::generate_pkcs8());
    compose_with(state, Arc::new(key.expect("a generated key")))
}

/// [`compose`] with the development issuer signing with `dev_key`.
pub fn compose_with(state: AppState, dev_key: Arc<helix_core::http::dev_auth::DevAuthKey>) -> axum::Router {
    let mut app = helix_agent_runs::routes(state.clone())
        .merge(helix_discovery::routes(state.clone()))
        .merge(helix_mcp::routes(state.clone()))
        .merge(helix_account::routes(state.clone()))
        .merge(helix_rooms::routes(state.clone()))
        .merge(helix_ingress::routes(state.clone()));
    if let Some(issuer) = helix_core::http::dev_routes::router(state.clone(), dev_key) {
        app = app.merge(issuer);
    }
    app.fallback_service(helix_core::http::fallback_router(state))
}

pub fn test_config(extra: &[(&str, &str)]) -> Config {
    let mut vars: Vec<(String, String)> = vec![
        ("HELIX_AGENT_ALLOW_LOCAL_HS256".into(), "1".into()),
        ("HELIX_AGENT_LOCAL_JWT_SECRET".into(), SECRET.into()),
        ("HELIX_AGENT_DATABASE_SCOPES".into(), "research_library,public_web".into()),
        ("CASIMIR_PUBLIC_BASE_URL".into(), "http://127.0.0.1:9000".into()),
    ];
    for (k, v) in extra {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_string(), v.to_string()));
    }
    // The audience is the metadata's resource: on the public origin unless a test says otherwise.
    if !vars.iter().any(|(name, _)| name == "HELIX_AGENT_OAUTH_AUDIENCE") {
        let base = vars.iter().find(|(name, _)| name == "CASIMIR_PUBLIC_BASE_URL").map(|(_, v)| v.clone());
        vars.push(("HELIX_AGENT_OAUTH_AUDIENCE".into(), format!("{}/mcp", base.unwrap_or_default())));
    }
    Config::from_lookup(DefaultMode::Development, &move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        .expect("test config")
}

/// The host every file in `events/` is addressed to (`api.example.com`): a server that
/// admits it, so the emulated API Gateway events pass host and origin admission.
pub const EVENTS_HOST: &[(&str, &str)] = &[
    ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
    ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
    ("HELIX_AGENT_ALLOWED_ORIGINS", "https://api.example.com"),
];

/// Variables of a production configuration (no local HS256; proxies on loopback trusted).
pub const PRODUCTION: &[(&str, &str)] = &[
    ("HELIX_ENV", "production"),
    ("HELIX_AGENT_ALLOW_LOCAL_HS256", "0"),
    ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
    ("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/"),
    ("HELIX_AGENT_OAUTH_AUDIENCE", "https://api.example.com/mcp"),
    ("HELIX_AGENT_OAUTH_JWKS_URL", "https://issuer.example.com/.well-known/jwks.json"),
    ("HELIX_AGENT_OAUTH_PROVIDER", "auth0"),
    ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
    ("TRUST_PROXY", "loopback"),
];

/// One request over a fresh TCP connection, written as raw bytes; the answer is read
/// until the server closes the connection or `wait` passes.
pub async fn raw_exchange(base: &str, request: &[u8], wait: std::time::Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(request).await.unwrap();
    let mut out = vec![];
    let _ = tokio::time::timeout(wait, sock.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The JSON body of a raw HTTP/1.1 answer with a Content-Length body.
pub fn raw_json(answer: &str) -> Value {
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).unwrap_or(Value::Null)
}

/// An answer's status and JSON body (`Null` when the body is not JSON).
pub async fn read(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The error code of an error body ("" when it is not one).
pub fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

pub fn signer() -> TerminalSigner {
    TerminalSigner::from_seed(SIGNER_ISSUER, "k1", [42; 32])
}

/// The DynamoDB tests need an emulator that isolates transactions as DynamoDB does:
/// `scripts/moto-serial` (which marks every answer). Against a plain `moto_server` a
/// failed transaction's rollback can undo another request's committed one, so the
/// "exactly one of 16 concurrent claims wins" tests fail at random; refuse it up front.
async fn require_serial_emulator(endpoint: &str) {
    static CHECKED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CHECKED
        .get_or_init(|| async {
            let res = reqwest::get(endpoint).await.unwrap_or_else(|e| panic!("the emulator at {endpoint}: {e}"));
            assert!(
                res.headers().get("x-helix-moto-serial").is_some(),
                "HELIX_TEST_DYNAMODB_ENDPOINT={endpoint} is not scripts/moto-serial: a plain moto_server does not \
                 isolate transactions (run the tests through scripts/test, or start scripts/moto-serial)"
            );
        })
        .await;
}

async fn store_for(backend: Backend, dir: &std::path::Path) -> Arc<dyn Store> {
    match backend {
        Backend::Embedded => {
            Arc::new(helix_core::store::embedded::EmbeddedStore::open(&dir.join("helix.redb")).unwrap())
        }
        Backend::Dynamo => {
            let endpoint = std::env::var("HELIX_TEST_DYNAMODB_ENDPOINT")
                .expect("HELIX_TEST_DYNAMODB_ENDPOINT: run the tests through scripts/test, which starts the emulator");
            require_serial_emulator(&endpoint).await;
            let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .region(aws_config::Region::new("us-east-1"))
                .endpoint_url(endpoint)
                .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "tests"))
                .load()
                .await;
            let table = format!("helix-it-{}", helix_core::domain::random_hex(6));
            let store = helix_core::store::dynamo::DynamoStore::new(aws_sdk_dynamodb::Client::new(&conf), table);
            store.create_table().await.expect("create test table");
            Arc::new(store)
        }
    }
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(Backend::Embedded, &[]).await
    }

    pub async fn spawn_with(backend: Backend, extra: &[(&str, &str)]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::spawn_on(listener, backend, extra).await
    }

    /// A server whose public base URL is its own address (the browser lane needs this:
    /// its OpenID provider, redirect URI and same-origin rule all derive from it).
    pub async fn spawn_live(backend: Backend, extra: &[(&str, &str)]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let mut vars: Vec<(&str, &str)> = vec![("CASIMIR_PUBLIC_BASE_URL", base.as_str())];
        vars.extend_from_slice(extra);
        Self::spawn_on(listener, backend, &vars).await
    }

    /// A live server ([`Self::spawn_live`]) whose resource server verifies tokens of the
    /// development issuer through the JWKS path (ES256 at its own `dev_auth::JWKS_PATH`).
    pub async fn spawn_dev_issuer(backend: Backend) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let jwks = format!("{base}{}", helix_core::http::dev_auth::JWKS_PATH);
        let vars = [
            ("CASIMIR_PUBLIC_BASE_URL", base.as_str()),
            ("HELIX_AGENT_OAUTH_JWKS_URL", jwks.as_str()),
            ("HELIX_AGENT_OAUTH_ALGORITHMS", "ES256"),
            ("HELIX_AGENT_OAUTH_AUTHORIZATION_SERVERS", base.as_str()),
            ("HELIX_AGENT_OAUTH_ISSUER", base.as_str()),
        ];
        Self::spawn_on(listener, backend, &vars).await
    }

    /// A server whose turns run on `executor` instead of the scripted one (the scripted
    /// executor stays in `executor` and is never called).
    pub async fn spawn_with_executor(
        backend: Backend,
        extra: &[(&str, &str)],
        executor: Arc<dyn helix_core::executor::TurnExecutor>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::spawn_inner(listener, backend, extra, Some(executor)).await
    }

    /// A server whose configuration `tune` changes after it is read (e.g. production
    /// mode over the local HS256 test tokens, which a production read would refuse).
    pub async fn spawn_tuned(backend: Backend, extra: &[(&str, &str)], tune: impl FnOnce(&mut Config)) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::spawn_inner_tuned(listener, backend, extra, None, tune).await
    }

    async fn spawn_on(listener: tokio::net::TcpListener, backend: Backend, extra: &[(&str, &str)]) -> Self {
        Self::spawn_inner(listener, backend, extra, None).await
    }

    async fn spawn_inner(
        listener: tokio::net::TcpListener,
        backend: Backend,
        extra: &[(&str, &str)],
        turn_executor: Option<Arc<dyn helix_core::executor::TurnExecutor>>,
    ) -> Self {
        Self::spawn_inner_tuned(listener, backend, extra, turn_executor, |_| {}).await
    }

    async fn spawn_inner_tuned(
        listener: tokio::net::TcpListener,
        backend: Backend,
        extra: &[(&str, &str)],
        turn_executor: Option<Arc<dyn helix_core::executor::TurnExecutor>>,
        tune: impl FnOnce(&mut Config),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(extra);
        tune(&mut config);
        let signer = signer();
        config.trusted_terminal_keys.insert(SIGNER_ISSUER, "k1", signer.verifying_key());
        let executor = Arc::new(ScriptedExecutor::new(vec![], Some(signer)));
        let faults = Arc::new(Faults::default());
        let store: Arc<dyn Store> =
            Arc::new(FaultyStore { inner: store_for(backend, dir.path()).await, faults: faults.clone() });
        let turns = turn_executor.unwrap_or_else(|| executor.clone());
        let state = helix_core::wiring::app_state(config, store, turns);
        let dev_key = Arc::new(
            helix_core::http::dev_auth::DevAuthKey::from_pkcs8(
                &helix_core::http::dev_auth::DevAuthKey::generate_pkcs8(),
            )
            .expect("a generated key"),
        );
        let app = compose_with(state.clone(), dev_key.clone());
        let base = format!("http://{}", listener.local_addr().unwrap());
        let limits = state.services.config.server;
        // The same socket server as `helix serve`: its limits are part of what is tested.
        tokio::spawn(async move {
            helix_core::http::server::serve(listener, app, limits, std::future::pending()).await.unwrap()
        });
        TestApp { base, faults, state, executor, http: reqwest::Client::new(), dev_key, _dir: dir }
    }

    /// A second server over this one's store, configuration and issuer key (a restart:
    /// nothing held in the first server's memory is shared), on a new port.
    pub async fn restarted(&self) -> TestApp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let config = (*self.state.services.config).clone();
        let executor = Arc::new(ScriptedExecutor::new(vec![], Some(signer())));
        let state = helix_core::wiring::app_state(config, self.state.services.store.clone(), executor.clone());
        let app = compose_with(state.clone(), self.dev_key.clone());
        let limits = state.services.config.server;
        tokio::spawn(async move {
            helix_core::http::server::serve(listener, app, limits, std::future::pending()).await.unwrap()
        });
        let dir = tempfile::tempdir().unwrap();
        TestApp {
            base,
            faults: self.faults.clone(),
            state,
            executor,
            http: reqwest::Client::new(),
            dev_key: self.dev_key.clone(),
            _dir: dir,
        }
    }

    /// Links (trusted path) and mints a token for the principal.
    pub async fn token_for(&self, subject: &str, tenant: &str, scopes: &[&str]) -> String {
        let o = &self.state.services.config.oauth;
        let id = LinkIdentity { issuer: &o.issuer, tenant, provider: &o.provider, subject };
        self.state.services.accounts.link_account(&id).await.unwrap();
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        helix_core::auth::jwt::mint_local_hs256(
            o.local_hs256_secret.as_ref().unwrap(),
            &o.issuer,
            &o.audience,
            subject,
            tenant,
            &scopes,
            3600,
        )
    }

    pub async fn token(&self) -> String {
        self.token_for(
            "alice",
            "tenant-a",
            &["helix.agent_runs.read", "helix.agent_runs.write", "helix.data.research_library.read"],
        )
        .await
    }

    pub fn post(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.base)).bearer_auth(token)
    }

    pub fn get(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base)).bearer_auth(token)
    }

    pub fn script(&self, step: Step) {
        self.executor.push(step);
    }
}
