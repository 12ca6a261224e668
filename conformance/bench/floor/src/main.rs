//! The floor of the MCP benchmark (`conformance/bench/run`): a bare rmcp stateless
//! Streamable HTTP server (JSON responses, no sessions), configured as helix's `/mcp` is,
//! that lists helix's own tool objects verbatim and answers `helix_run_inspect` with a
//! fixed run. No bearer check, no store, no pipeline: what rmcp itself costs per request.
//!
//! With `--data-dir`, it also serves the floor of REST inspect: a bare axum handler at
//! `GET /api/v1/agent-runs/{run_id}` that reads the run's item from helix's embedded
//! store (a copy of the bench server's data directory: redb locks its file) through the
//! storage kernel's key and decoder, and answers helix's run view. No bearer check, no
//! owner check, no pipeline: what the read and the answer cost.
//!
//!   helix-bench-floor --port P --tools tools.json --run run.json [--data-dir DIR]

use std::sync::Arc;

use anyhow::{Context, bail};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

// The allocator is helix's own: helix-core, linked for the store, sets mimalloc as every
// helix binary's; so the floor differs from helix only in what helix does per request.
use helix_core::store::Store;
use helix_core::store::embedded::EmbeddedStore;

struct Catalog {
    tools: Vec<Tool>,
    run: Value,
}

#[derive(Clone)]
struct Floor(Arc<Catalog>);

impl ServerHandler for Floor {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("helix-bench-floor", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.0.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.0.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let asks_for_the_run = request.name == "helix_run_inspect"
            && request.arguments.as_ref().and_then(|a| a.get("run_id")) == self.0.run.get("run_id");
        if !asks_for_the_run {
            return Err(ErrorData::invalid_params("the floor serves helix_run_inspect of its one run", None));
        }
        Ok(CallToolResult::structured(self.0.run.clone()).into())
    }
}

/// REST inspect's floor: the run's item, decoded and answered as helix's run view.
async fn inspect(
    axum::extract::State(store): axum::extract::State<Arc<EmbeddedStore>>,
    axum::extract::Path(run_id): axum::extract::Path<String>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use helix_core::service::records::runs::{run_from_item, run_key};
    let item = match store.get(&run_key(&run_id)).await {
        Ok(Some(item)) => item,
        Ok(None) => return axum::http::StatusCode::NOT_FOUND.into_response(),
        Err(_) => return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    let Ok(run) = run_from_item(&item) else { return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response() };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let json = run.observed_json(now).json;
    ([(axum::http::header::CONTENT_TYPE, "application/json")], json).into_response()
}

fn flag(args: &[String], name: &str) -> anyhow::Result<String> {
    let at = args.iter().position(|a| a == name).with_context(|| format!("missing {name}"))?;
    args.get(at + 1).cloned().with_context(|| format!("{name} needs a value"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: helix-bench-floor --port P --tools tools.json --run run.json [--data-dir DIR]");
        return Ok(());
    }
    let port: u16 = flag(&args, "--port")?.parse().context("--port")?;
    let read = |name: &str| -> anyhow::Result<Value> {
        let path = flag(&args, name)?;
        serde_json::from_str(&std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?)
            .with_context(|| format!("parsing {path}"))
    };
    let tools: Vec<Tool> = serde_json::from_value(read("--tools")?).context("--tools is not a tool list")?;
    let run = read("--run")?;
    if run.get("run_id").is_none() {
        bail!("--run has no run_id");
    }
    let floor = Floor(Arc::new(Catalog { tools, run }));
    let transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None);
    let service =
        StreamableHttpService::new(move || Ok(floor.clone()), Arc::new(NeverSessionManager::default()), transport);
    let mut app = axum::Router::new().route_service("/mcp", service);
    if args.iter().any(|a| a == "--data-dir") {
        let path = std::path::Path::new(&flag(&args, "--data-dir")?).join("helix.redb");
        let store = Arc::new(EmbeddedStore::open(&path).with_context(|| format!("opening {}", path.display()))?);
        let rest =
            axum::Router::new().route("/api/v1/agent-runs/{run_id}", axum::routing::get(inspect)).with_state(store);
        app = app.merge(rest);
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.with_context(|| format!("port {port}"))?;
    axum::serve(listener, app).await?;
    Ok(())
}
