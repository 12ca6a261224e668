//! `POST /mcp/device-check`: a second stateless MCP server that publishes exactly one
//! tool, `helix_environment_device_check` (scope `helix.rooms.read`, as its protected-
//! resource metadata advertises), so a read-only plugin cannot discover the run, room,
//! source or command catalog. Same pipeline, preflight rules and service layer as `/mcp`.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject, ListToolsResult, MetaObject,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::preflight::{self, Rejection};
use super::schema::{input_schema, output_schema_of};
use super::server::{PROTOCOL_VERSIONS, tool_error};
use crate::domain::scopes::ROOMS_READ;
use crate::domain::source::DeviceCheckReport;
use crate::domain::wire::McpErrorView;
use crate::error::ApiError;
use crate::http::{AppState, Group, RequestId, authenticate, parse_strict_value, pipeline, resource_metadata_url};
use crate::service::Caller;

pub const PATH: &str = "/mcp/device-check";
pub const TOOL: &str = "helix_environment_device_check";
const SCOPES: &[&str] = &[ROOMS_READ];

/// Arguments of helix_environment_device_check: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceCheckArgs {}

struct Built {
    input: &'static Value,
    tool: Tool,
}

static BUILT: LazyLock<Built> = LazyLock::new(|| {
    let input = input_schema::<DeviceCheckArgs>();
    let Value::Object(output) = json!({ "type": "object", "anyOf": [output_schema_of::<DeviceCheckReport>(), output_schema_of::<McpErrorView>()] })
    else {
        unreachable!()
    };
    let mut meta = MetaObject::new();
    meta.insert("securitySchemes".into(), security_schemes());
    let tool = Tool::new(
        TOOL,
        "Report the connection health of the environment sources of your rooms: for each room you belong to, \
         each source's adapter profile, whether its producer registered and was admitted, its producer epoch, \
         the age of its last observation and whether that is fresh or stale. Never returns a credential, an \
         endpoint or a player id. Read-only; nothing is executed.",
        Arc::new(input.clone()),
    )
    .with_title("Environment device check")
    .with_raw_output_schema(Arc::new(output as JsonObject))
    .with_annotations(
        ToolAnnotations::with_title("Environment device check")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
    .with_meta(meta);
    Built { input: Box::leak(Box::new(Value::Object(input))), tool }
});

fn security_schemes() -> Value {
    json!([{ "type": "oauth2", "scopes": SCOPES }])
}

fn lookup(name: &str) -> Option<&'static Value> {
    (name == TOOL).then(|| BUILT.input)
}

/// The one-tool handler (one per request: the transport is stateless).
pub struct DeviceCheckMcp {
    state: AppState,
}

impl ServerHandler for DeviceCheckMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("helix-device-check", env!("CARGO_PKG_VERSION"))
                    .with_title("Helix environment device check"),
            )
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions("One read-only tool: helix_environment_device_check.")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![BUILT.tool.clone()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == TOOL).then(|| BUILT.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        let ext = context.extensions.get::<http::request::Parts>().map(|p| &p.extensions);
        let request_id = ext.and_then(|e| e.get::<RequestId>()).map(|r| r.0.clone()).unwrap_or_default();
        let metadata_url = resource_metadata_url(&self.state.services.config.public_base_url, Group::DeviceCheck);
        let Some(caller) = ext.and_then(|e| e.get::<Caller>()).cloned() else {
            return Ok(tool_error(&ApiError::AuthenticationRequired, &request_id, &metadata_url).into());
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = match parse_strict_value::<DeviceCheckArgs>(&arguments) {
            Err(e) => Err(e),
            Ok(DeviceCheckArgs {}) => self.state.services.sources.device_check(&caller).await,
        };
        Ok(match result {
            Ok(report) => CallToolResult::structured(serde_json::to_value(report).unwrap_or(Value::Null)),
            Err(e) => tool_error(&e, &request_id, &metadata_url),
        }
        .into())
    }
}

type Service = StreamableHttpService<DeviceCheckMcp, NeverSessionManager>;

#[derive(Clone)]
struct DcState {
    app: AppState,
    service: Service,
}

pub fn router(state: AppState) -> Router {
    let transport = super::transport_config(&state.services.config);
    let factory_state = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(DeviceCheckMcp { state: factory_state.clone() }),
        Arc::new(NeverSessionManager::default()),
        transport,
    );
    Router::new()
        .route(PATH, post(handle).fallback(method_not_allowed))
        .with_state(DcState { app: state.clone(), service })
        .layer(axum::middleware::from_fn_with_state((state, Group::DeviceCheck), pipeline))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

fn is_json(value: Option<&HeaderValue>) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

fn rejection(r: Rejection) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(r.body())).into_response()
}

async fn handle(State(dc): State<DcState>, req: Request) -> Result<Response, ApiError> {
    let (mut parts, body) = req.into_parts();
    if !is_json(parts.headers.get(CONTENT_TYPE)) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let limit = dc.app.services.config.mcp_limits.body_bytes;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| ApiError::PayloadTooLarge { limit })?;
    let envelope = match preflight::check_for(&bytes, &lookup) {
        Ok(e) => e,
        Err(r) => return Ok(rejection(r)),
    };
    let caller = authenticate(&dc.app, &parts, |_| vec![]).await?;
    parts.extensions.insert(caller);
    let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if accept.is_empty() || accept.contains("application/json") || accept.contains("*/*") {
        parts.headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    }
    let res = dc.service.handle(Request::from_parts(parts, Body::from(bytes))).await.map(Body::new);
    Ok(match envelope {
        preflight::Envelope::Request { method: "tools/list" } => with_security_schemes(res).await,
        _ => res,
    })
}

/// The SDK's tool model has no `securitySchemes` member: added to the listed tool here.
async fn with_security_schemes(res: Response<Body>) -> Response<Body> {
    if res.status() != StatusCode::OK || !is_json(res.headers().get(CONTENT_TYPE)) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::internal(std::io::Error::other("unreadable tools/list response")).into_response();
    };
    let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    if let Some(tools) = message.pointer_mut("/result/tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            tool.insert("securitySchemes".into(), security_schemes());
        }
    }
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(message.to_string()))
}
