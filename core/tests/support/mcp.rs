//! The MCP router of the core integration tests, driven through `tower::ServiceExt::oneshot`
//! (no socket): an app on the embedded store with scripted turns, its requests and replies,
//! and the checks of a tool result against the outputSchema the tool publishes.
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use helix_core::config::{Config, DefaultMode};
use helix_core::domain::authority::TerminalSigner;
use helix_core::executor::scripted::ScriptedExecutor;
use helix_core::http::AppState;
use helix_core::mcp::validate::validate;
use helix_core::service::accounts::LinkIdentity;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

pub const SECRET: &str = "mcp-test-secret-0123456789abcdef-0123";
pub const FULL: &[&str] = &["helix.agent_runs.read", "helix.agent_runs.write", "helix.data.research_library.read"];
pub const READ_ONLY: &[&str] = &["helix.agent_runs.read", "helix.data.research_library.read"];

pub struct App {
    pub state: AppState,
    /// One router per app, as a server has: its `tools/list` cache lives across requests.
    pub router: axum::Router,
    _dir: tempfile::TempDir,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Value,
}

impl App {
    pub fn new() -> Self {
        Self::scripted().0
    }

    /// An app whose turns are scripted, with the script's terminal signer trusted.
    pub fn scripted() -> (Self, Arc<ScriptedExecutor>) {
        let vars = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", SECRET),
            ("HELIX_AGENT_DATABASE_SCOPES", "research_library"),
        ];
        let mut config = Config::from_lookup(DefaultMode::Development, &|k| {
            vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        })
        .expect("test config");
        let signer = TerminalSigner::from_seed("helix-ask-test", "k1", [42; 32]);
        config.trusted_terminal_keys.insert("helix-ask-test", "k1", signer.verifying_key());
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(helix_core::store::embedded::EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap());
        let executor = Arc::new(ScriptedExecutor::new(vec![], Some(signer)));
        let state = helix_core::wiring::app_state(config, store, executor.clone());
        let router = helix_core::mcp::router(state.clone()).merge(helix_core::mcp::device_check_router(state.clone()));
        (App { router, state, _dir: dir }, executor)
    }

    pub async fn token(&self, subject: &str, scopes: &[&str]) -> String {
        let o = &self.state.services.config.oauth;
        let id = LinkIdentity { issuer: &o.issuer, tenant: "tenant-a", provider: &o.provider, subject };
        self.state.services.accounts.link_account(&id).await.unwrap();
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        let secret = o.local_hs256_secret.as_ref().unwrap();
        helix_core::auth::jwt::mint_local_hs256(secret, &o.issuer, &o.audience, subject, "tenant-a", &scopes, 600)
    }

    pub async fn send(&self, req: Request<Body>) -> Reply {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        Reply { status, headers, body }
    }

    pub async fn post_raw(&self, token: Option<&str>, body: String, extra: &[(&str, &str)]) -> Reply {
        self.post_to("/mcp", token, body, extra).await
    }

    pub async fn post_to(&self, path: &str, token: Option<&str>, body: String, extra: &[(&str, &str)]) -> Reply {
        let mut req = Request::post(path).header("host", "127.0.0.1:9000").header("content-type", "application/json");
        if !extra.iter().any(|(k, _)| *k == "accept") {
            req = req.header("accept", "application/json, text/event-stream");
        }
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        self.send(req.body(Body::from(body)).unwrap()).await
    }

    pub async fn post(&self, token: Option<&str>, msg: Value) -> Reply {
        self.post_raw(token, msg.to_string(), &[("mcp-protocol-version", "2025-11-25")]).await
    }

    pub async fn call(&self, token: &str, name: &str, arguments: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let reply = self.post(Some(token), msg).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body["result"].clone()
    }

    pub async fn tools(&self, token: &str) -> Vec<Value> {
        let reply = self.post(Some(token), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body["result"]["tools"].as_array().unwrap().clone()
    }
}

pub fn start_args(key: &str) -> Value {
    json!({"idempotency_key": key, "request": {"objective": "Measure the Casimir force.", "database_scope": ["research_library"]}})
}

pub fn output_schema<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    &tools.iter().find(|t| t["name"] == name).unwrap()["outputSchema"]
}

/// A successful result: text JSON equal to structuredContent, valid against outputSchema.
pub fn assert_success(result: &Value, schema: &Value) -> Value {
    assert_ne!(result["isError"], true, "{result}");
    let sc = result["structuredContent"].clone();
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, sc);
    assert!(validate(schema, &sc), "structuredContent does not validate: {sc}");
    sc
}

pub fn assert_error(result: &Value, schema: &Value, code: &str) -> Value {
    assert_eq!(result["isError"], true, "{result}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["schema"], "helix.agent_api.error.v1");
    assert_eq!(sc["error"]["code"], code, "{sc}");
    assert!(validate(schema, sc), "error envelope does not validate against the outputSchema: {sc}");
    sc["error"].clone()
}
