//! The MCP server handler of a front: `tools/list` from its catalog, `tools/call` run by
//! the row's handler over the same `Services` methods REST uses, and the framing of what
//! the handler produced as the SDK's result (or the exact bytes the SDK would write, for
//! the front's direct path). The principal, request id and invocation limits come from
//! the HTTP request parts. Knows of its front only the catalog and the route group; must
//! not depend on a tool's handler or arguments.

use std::borrow::Cow;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverResult, InitializeRequestParams,
    InitializeResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, MetaObject,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::apps;
pub(crate) use super::call_context::CallContext;
use super::call_context::call_context;
use super::catalog::Front;
use super::catalog::ToolSpec;
use super::tools::{Call, Outcome};
use crate::domain::wire::{self, McpErrorView, NotAnAnswer};
use crate::error::ApiError;
use crate::http::{AppState, challenge, resource_metadata_url};

/// Protocol revisions served, oldest first. `initialize` negotiates among the ones with a
/// handshake; 2026-07-28 clients negotiate per request (`server/discover`).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

pub const REPLAYED_META: &str = "helix/idempotency_replayed";

/// `ttlMs` of the results 2026-07-28 makes cacheable (`server/discover`, `tools/list`,
/// `resources/list`, `resources/templates/list`, `resources/read`): they change only with
/// a deployment (the catalog, the server's capabilities, the MCP App view).
pub const CACHE_TTL_MS: u64 = 300_000;

/// The cache hints of a cacheable result, on 2026-07-28 and later only (older revisions
/// have no such fields): `ttlMs` [`CACHE_TTL_MS`] and `cacheScope: "private"`. Every MCP
/// request is authenticated (an anonymous one is answered `401`), so no result may be
/// served by a cache shared across authorization contexts.
fn cache_hints(context: &RequestContext<RoleServer>) -> Option<(u64, CacheScope)> {
    let version = context.protocol_version()?;
    (version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()).then_some((CACHE_TTL_MS, CacheScope::Private))
}
pub const CHALLENGE_META: &str = "mcp/www_authenticate";

/// One handler per request (the transport is stateless); it only holds the shared state
/// and the front it serves.
pub struct HelixMcp {
    state: AppState,
    front: &'static Front,
}

impl HelixMcp {
    pub fn new(state: AppState, front: &'static Front) -> Self {
        Self { state, front }
    }
}

impl HelixMcp {
    /// Whether this request's client declared the MCP Apps extension and this front has a view.
    fn apps(&self, context: &RequestContext<RoleServer>) -> bool {
        self.front.catalog.has_views() && apps::requested(context)
    }

    /// A failure as a tool result: `isError`, the error envelope as structured content,
    /// and for a scope refusal the challenge a host uses to re-authorize (pointing at this
    /// front's protected-resource metadata).
    fn error_output(&self, err: &ApiError, request_id: &str) -> ToolOutput {
        let metadata_url = resource_metadata_url(&self.state.services.config.public_base_url, self.front.group);
        err.log(request_id);
        let view = McpErrorView { envelope: err.envelope(request_id), flags: NotAnAnswer::default() };
        let meta = match (err, challenge(err, &metadata_url)) {
            (ApiError::InsufficientScope { .. }, Some(c)) => {
                let mut meta = MetaObject::new();
                meta.insert(CHALLENGE_META.into(), json!([c]));
                Some(meta)
            }
            _ => None,
        };
        ToolOutput { content: Content::Value(wire::to_value(&view)), is_error: true, meta }
    }

    /// One tool call of a catalog row: the SDK's `call_tool` and the front's direct path
    /// both end here.
    pub(crate) async fn call(&self, spec: &ToolSpec, arguments: &Value, cx: CallContext) -> ToolOutput {
        let Some(principal) = cx.principal else {
            return self.error_output(&ApiError::AuthenticationRequired, &cx.request_id);
        };
        if let Err(err) = self.check_arguments(spec, arguments) {
            tracing::info!(request_id = %cx.request_id, tool = spec.name, "mcp tool arguments off the input schema");
            return self.error_output(&err, &cx.request_id);
        }
        let call = Call { services: &self.state.services, actor: &principal, arguments, invocation: cx.invocation };
        match (spec.io.call)(call).await {
            Ok(outcome) => framed(outcome),
            Err(err) => {
                tracing::info!(request_id = %cx.request_id, tool = spec.name, code = err.code(), "mcp tool refused");
                let err = with_row_scopes(spec, err);
                self.error_output(&err, &cx.request_id)
            }
        }
    }
}

impl HelixMcp {
    /// Arguments off the published input schema are a tool result the model can correct
    /// itself from (SEP-1303): the field and the rule, built from the schema alone.
    pub(crate) fn check_arguments(&self, spec: &ToolSpec, arguments: &Value) -> Result<(), ApiError> {
        match self.front.catalog.input_schema(spec.name).map(|schema| super::validate::check(schema, arguments)) {
            Some(Err(v)) => Err(ApiError::InvalidArgument { field: v.field(), rule: v.rule }),
            _ => Ok(()),
        }
    }

    pub(crate) fn services(&self) -> &crate::service::Services {
        &self.state.services
    }

    /// A tool's refusal as its result ([`Self::call`]'s framing of a service error).
    pub(crate) fn refusal(&self, spec: &ToolSpec, err: ApiError, request_id: &str) -> ToolOutput {
        tracing::info!(request_id, tool = spec.name, code = err.code(), "mcp tool refused");
        self.error_output(&with_row_scopes(spec, err), request_id)
    }

    /// A stored or derived refusal as a tool result (no scope to add).
    pub(crate) fn refusal_output(&self, err: &ApiError, request_id: &str) -> ToolOutput {
        self.error_output(err, request_id)
    }
}

/// A scope refusal names every scope the tool needs: the row's complete set (what its
/// `securitySchemes` publish), then any the service added for this request.
fn with_row_scopes(spec: &ToolSpec, err: ApiError) -> ApiError {
    match err {
        ApiError::InsufficientScope { required } => {
            let mut all: Vec<String> = spec.scopes.iter().map(|s| s.to_string()).collect();
            all.extend(required.into_iter().filter(|s| !spec.scopes.contains(&s.as_str())));
            ApiError::InsufficientScope { required: all }
        }
        other => other,
    }
}

fn framed(outcome: Outcome) -> ToolOutput {
    match outcome {
        Outcome::Value(v) => ToolOutput { content: Content::Value(v), is_error: false, meta: None },
        Outcome::Object(json) => ToolOutput { content: Content::Object(json), is_error: false, meta: None },
        Outcome::Mutation { status, body, replayed } => {
            // A replayed receipt may hold a stored error response; it stays an error, and
            // carries the four false flags like every MCP result.
            let is_error = status >= 400;
            let content = if is_error { with_false_flags(body) } else { body };
            let mut meta = MetaObject::new();
            meta.insert(REPLAYED_META.into(), Value::Bool(replayed));
            ToolOutput { content: Content::Value(content), is_error, meta: Some(meta) }
        }
    }
}

/// A stored error envelope (a replayed refusal) as an MCP error result's content.
fn with_false_flags(mut body: Value) -> Value {
    if let (Some(obj), Value::Object(flags)) = (body.as_object_mut(), wire::to_value(&NotAnAnswer::default())) {
        obj.extend(flags);
    }
    body
}

impl ServerHandler for HelixMcp {
    fn get_info(&self) -> ServerConfig {
        self.front.catalog.info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if apps::declared(&request.capabilities) && self.front.catalog.has_views() {
            apps::advertise(&mut result.capabilities);
        }
        Ok(result)
    }

    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        let mut info = self.get_info();
        if self.apps(&context) {
            apps::advertise(&mut info.capabilities);
        }
        let result = DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), info);
        Ok(match cache_hints(&context) {
            Some((ttl, scope)) => result.with_ttl_ms(ttl).with_cache_scope(scope),
            None => result,
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::with_all_items(self.front.catalog.tools_for(apps::requested(&context)));
        (result.ttl_ms, result.cache_scope) = cache_hints(&context).unzip();
        Ok(result)
    }

    // Resources are the MCP App views, only for a client that declared the extension;
    // any other client gets the SDK's answer without a resources capability.

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if !self.apps(&context) {
            return Err(ErrorData::method_not_found::<rmcp::model::ListResourcesRequestMethod>());
        }
        let mut result = apps::list(&self.front.catalog.views());
        (result.ttl_ms, result.cache_scope) = cache_hints(&context).unzip();
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        if !self.apps(&context) {
            return Err(ErrorData::method_not_found::<rmcp::model::ListResourceTemplatesRequestMethod>());
        }
        let mut result = ListResourceTemplatesResult::default();
        (result.ttl_ms, result.cache_scope) = cache_hints(&context).unzip();
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if !self.apps(&context) {
            return Err(ErrorData::method_not_found::<rmcp::model::ReadResourceRequestMethod>());
        }
        let views = self.front.catalog.views();
        let view = views
            .iter()
            .find(|v| v.uri == request.uri)
            .ok_or_else(|| ErrorData::resource_not_found("no such resource", Some(json!({ "uri": request.uri }))))?;
        let mut result = apps::read(view);
        (result.ttl_ms, result.cache_scope) = cache_hints(&context).unzip();
        Ok(result.into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.front.catalog.tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The preflight admitted only catalog names; anything else is a protocol error.
        let spec =
            self.front.catalog.find(&request.name).ok_or_else(|| ErrorData::invalid_params("Unknown tool", None))?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        if super::task_request::requested(spec.name, &context, &self.services().runs) {
            return Ok(self.call_as_task(spec, &arguments, &context).await);
        }
        Ok(self.call(spec, &arguments, call_context(&context)).await.into_result().into())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        self.task_state(&request.task_id, &context).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        HelixMcp::cancel_task(self, &request.task_id, &context).await
    }
}

/// What a tool call produced, before framing: the structured content (its text copy is
/// the same JSON), whether it is an error result, and its `_meta`.
pub(crate) struct ToolOutput {
    content: Content,
    is_error: bool,
    meta: Option<MetaObject>,
}

/// A result's structured content: a value, or a view the service already serialized
/// (the text of a JSON object, [`wire::RunJson`]).
enum Content {
    Value(Value),
    Object(String),
}

impl Content {
    fn is_object(&self) -> bool {
        match self {
            Content::Value(v) => v.is_object(),
            Content::Object(_) => true,
        }
    }
}

impl ToolOutput {
    /// A mutation's answer, fresh or replayed, as a tool result.
    pub(crate) fn of_mutation<V>(m: crate::service::Mutation<V>) -> Self {
        framed(Outcome::Mutation { status: m.status, body: m.body, replayed: m.replayed })
    }

    /// The SDK's result (`structured` / `structured_error`, then the `_meta`).
    pub(crate) fn into_result(self) -> CallToolResult {
        let (content, text) = match self.content {
            Content::Value(v) => (v, None),
            Content::Object(json) => (serde_json::from_str(&json).expect("serialized by serde_json"), Some(json)),
        };
        let mut result =
            if self.is_error { CallToolResult::structured_error(content) } else { CallToolResult::structured(content) };
        // The text copy is the service's own serialization (declared member order), as on
        // the direct path; only `structuredContent` goes through the SDK's sorted model.
        if let Some(text) = text {
            result.content = vec![rmcp::model::ContentBlock::text(text)];
        }
        result.with_meta(self.meta)
    }

    /// The JSON-RPC response the SDK writes for [`Self::into_result`] to a peer before
    /// 2026-07-28 (no `resultType`; a non-object structured content only as its text
    /// copy), byte for byte, with the content serialized once: the text copy is that
    /// same string, escaped.
    pub(crate) fn legacy_response(&self, id: &rmcp::model::RequestId) -> serde_json::Result<Vec<u8>> {
        let text = match &self.content {
            Content::Value(v) => Cow::Owned(serde_json::to_string(v)?),
            Content::Object(json) => Cow::Borrowed(json.as_str()),
        };
        let mut out = Vec::with_capacity(2 * text.len() + 160);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut out, id)?;
        out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
        push_json_quoted(&mut out, &text);
        out.extend_from_slice(b"}]");
        if self.content.is_object() {
            out.extend_from_slice(br#","structuredContent":"#);
            out.extend_from_slice(text.as_bytes());
        }
        let is_error: &[u8] = if self.is_error { br#","isError":true"# } else { br#","isError":false"# };
        out.extend_from_slice(is_error);
        if let Some(meta) = &self.meta {
            out.extend_from_slice(br#","_meta":"#);
            serde_json::to_writer(&mut out, meta)?;
        }
        out.extend_from_slice(b"}}");
        Ok(out)
    }
}

/// `json` (compact JSON that serde_json wrote) as a JSON string, as serde_json writes it.
/// Such text holds no control characters (serde_json escapes them inside strings and
/// writes no whitespace between tokens), so `"` and `\` are the only bytes to escape.
fn push_json_quoted(out: &mut Vec<u8>, json: &str) {
    debug_assert!(!json.bytes().any(|b| b < 0x20), "compact serde_json output");
    out.reserve(json.len() + json.len() / 4 + 2);
    out.push(b'"');
    let bytes = json.as_bytes();
    let mut start = 0;
    for at in memchr::memchr2_iter(b'"', b'\\', bytes) {
        out.extend_from_slice(&bytes[start..at]);
        out.push(b'\\');
        out.push(bytes[at]);
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{NumberOrString, ServerJsonRpcMessage, ServerResult};

    /// The SDK's bytes for a result to a pre-2026-07-28 peer (what its handler does).
    fn sdk_bytes(output: ToolOutput, id: &rmcp::model::RequestId) -> Vec<u8> {
        let mut result = ServerResult::from(CallToolResponse::from(output.into_result()));
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
        serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone())).unwrap()
    }

    #[test]
    fn the_legacy_frame_is_the_sdks_byte_for_byte() {
        let mut meta = MetaObject::new();
        meta.insert(REPLAYED_META.into(), Value::Bool(true));
        let outputs = || {
            [
                ToolOutput {
                    content: Content::Value(
                        json!({"run_id": "run_1", "text": "a \"quoted\"\nline \u{e9}", "n": [1, 2.5]}),
                    ),
                    is_error: false,
                    meta: None,
                },
                ToolOutput {
                    content: Content::Value(json!({"error": {"code": "not_found"}})),
                    is_error: true,
                    meta: None,
                },
                ToolOutput {
                    content: Content::Value(json!({"ctl": "\u{1}\u{1f}\u{7f}\\ \\\"", "k\"ey\\": "\u{2028}/"})),
                    is_error: false,
                    meta: None,
                },
                ToolOutput {
                    content: Content::Value(json!({"run_id": "run_2"})),
                    is_error: false,
                    meta: Some(meta.clone()),
                },
                ToolOutput { content: Content::Value(json!([{"a": 1}, "b"])), is_error: false, meta: None },
                ToolOutput { content: Content::Value(json!("just text")), is_error: true, meta: Some(meta.clone()) },
                ToolOutput {
                    content: Content::Object(json!({"run_id": "run_3", "q": "\"\\"}).to_string()),
                    is_error: false,
                    meta: None,
                },
            ]
        };
        for id in [NumberOrString::Number(7), NumberOrString::Number(-3), NumberOrString::String("call-\"1\"".into())] {
            for (mine, sdk) in outputs().into_iter().zip(outputs()) {
                let bytes = mine.legacy_response(&id).unwrap();
                assert_eq!(String::from_utf8(bytes).unwrap(), String::from_utf8(sdk_bytes(sdk, &id)).unwrap());
            }
        }
    }
}
