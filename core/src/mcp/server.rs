//! The MCP server handler: `tools/list` from the catalog, `tools/call` framed over the
//! same `Services` methods REST uses. The principal, request id and invocation limits
//! come from the HTTP request parts the transport hands to every call.

use std::borrow::Cow;
use std::sync::LazyLock;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult, MetaObject,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::catalog::{
    self, CancelArgs, ContinueArgs, ListEventsArgs, Op, RunArgs, SourceCreateArgs, SourceListArgs, StartArgs,
};
use crate::domain::ids::IdempotencyKey;
use crate::domain::wire::{self, McpErrorView, NotAnAnswer};
use crate::error::ApiError;
use crate::http::{AppState, Group, Invocation, RequestId, challenge, resource_metadata_url};
// Strict argument parsing with the REST body's error mapping (never echoes values).
use crate::http::parse_strict_value as args;
use crate::service::Caller;
use crate::service::Mutation;
use crate::service::runs::DEFAULT_EVENT_LIMIT;

/// Protocol revisions served, oldest first. `initialize` negotiates among the ones with a
/// handshake; 2026-07-28 clients negotiate per request (`server/discover`).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

pub const REPLAYED_META: &str = "helix/idempotency_replayed";
pub const CHALLENGE_META: &str = "mcp/www_authenticate";

const INSTRUCTIONS: &str = "Helix runs are durable, bounded specialist investigations. Loop: helix_run_start -> \
helix_run_continue (one solver turn per call, with the current version as request.expected_version) until \
recommended_next_action is \"stop\"; answer pending_questions when it is \"answer_questions\". Every mutation \
takes an explicit idempotency_key: reuse it only to retry the same request. Results are observations with \
answer_authority=false, never an answer by themselves.";

/// One handler per request (the transport is stateless); it only holds the shared state.
pub struct HelixMcp {
    state: AppState,
}

impl HelixMcp {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// What a successful tool call produced.
enum Outcome {
    Value(Value),
    Object(String),
    Mutation(Mutation),
}

/// The per-request values the HTTP handler put into the request extensions.
pub(crate) struct CallContext {
    principal: Option<Caller>,
    request_id: String,
    invocation: Invocation,
}

impl CallContext {
    /// Takes the values out of the request's extensions (the direct path owns them).
    pub(crate) fn take(ext: &mut http::Extensions) -> Self {
        CallContext {
            principal: ext.remove::<Caller>(),
            request_id: ext.get::<RequestId>().map(|r| r.0.clone()).unwrap_or_default(),
            invocation: ext.get::<Invocation>().copied().unwrap_or_default(),
        }
    }
}

fn call_context(ctx: &RequestContext<RoleServer>) -> CallContext {
    let ext = ctx.extensions.get::<http::request::Parts>().map(|p| &p.extensions);
    CallContext {
        principal: ext.and_then(|e| e.get::<Caller>()).cloned(),
        request_id: ext.and_then(|e| e.get::<RequestId>()).map(|r| r.0.clone()).unwrap_or_default(),
        invocation: ext.and_then(|e| e.get::<Invocation>()).copied().unwrap_or_default(),
    }
}

fn key(raw: &str) -> Result<IdempotencyKey, ApiError> {
    IdempotencyKey::parse(raw).ok_or(ApiError::InvalidIdempotencyKey)
}

impl HelixMcp {
    async fn dispatch(
        &self,
        op: Op,
        p: &Caller,
        arguments: &Value,
        invocation: Invocation,
    ) -> Result<Outcome, ApiError> {
        let services = &self.state.services;
        Ok(match op {
            Op::RunStart => {
                let a: StartArgs = args(arguments)?;
                Outcome::Mutation(services.runs.start_run(p, &key(&a.idempotency_key)?, a.request).await?)
            }
            Op::RunContinue => {
                let a: ContinueArgs = args(arguments)?;
                let k = key(&a.idempotency_key)?;
                Outcome::Mutation(services.runs.continue_run(p, &a.run_id, &k, a.request, invocation).await?)
            }
            Op::RunCancel => {
                let a: CancelArgs = args(arguments)?;
                Outcome::Mutation(services.runs.cancel_run(p, &a.run_id, &key(&a.idempotency_key)?, a.request).await?)
            }
            Op::RunInspect => {
                Outcome::Object(services.runs.inspect_run(p, &args::<RunArgs>(arguments)?.run_id).await?.json)
            }
            Op::RunEvidence => Outcome::Value(wire::to_value(
                &services.runs.run_evidence(p, &args::<RunArgs>(arguments)?.run_id).await?,
            )),
            Op::RunEvents => {
                let a: ListEventsArgs = args(arguments)?;
                let (after, limit) = (a.after_seq.unwrap_or(0), a.limit.unwrap_or(DEFAULT_EVENT_LIMIT));
                Outcome::Value(wire::to_value(&services.runs.list_events(p, &a.run_id, after, limit).await?))
            }
            Op::Room(op) => match super::rooms::dispatch(services, op, p, arguments).await? {
                super::rooms::RoomOutcome::Value(v) => Outcome::Value(v),
                super::rooms::RoomOutcome::Mutation(m) => Outcome::Mutation(m),
            },
            Op::SourceList => {
                let list = services.sources.list_sources(p, &args::<SourceListArgs>(arguments)?.room_id).await?;
                Outcome::Value(list.projected().map_err(ApiError::internal)?)
            }
            Op::SourceCreate => {
                let a: SourceCreateArgs = args(arguments)?;
                Outcome::Mutation(
                    services.sources.create_source(p, &a.room_id, &key(&a.idempotency_key)?, a.request).await?,
                )
            }
        })
    }

    /// A failure as a tool result: `isError`, the error envelope as structured content,
    /// and for a scope refusal the challenge a host uses to re-authorize.
    fn error_output(&self, err: &ApiError, request_id: &str) -> ToolOutput {
        let metadata_url = resource_metadata_url(&self.state.services.config.public_base_url, Group::Mcp);
        tool_error_output(err, request_id, &metadata_url)
    }
}

/// A failure as a tool result (shared with the Device Check server, whose challenge
/// points at its own metadata).
pub(crate) fn tool_error(err: &ApiError, request_id: &str, metadata_url: &str) -> CallToolResult {
    tool_error_output(err, request_id, metadata_url).into_result()
}

fn tool_error_output(err: &ApiError, request_id: &str, metadata_url: &str) -> ToolOutput {
    err.log(request_id);
    let view = McpErrorView { envelope: err.envelope(request_id), flags: NotAnAnswer::default() };
    let meta = match (err, challenge(err, metadata_url)) {
        (ApiError::InsufficientScope { .. }, Some(c)) => {
            let mut meta = MetaObject::new();
            meta.insert(CHALLENGE_META.into(), json!([c]));
            Some(meta)
        }
        _ => None,
    };
    ToolOutput { content: Content::Value(wire::to_value(&view)), is_error: true, meta }
}

fn framed(outcome: Outcome) -> ToolOutput {
    match outcome {
        Outcome::Value(v) => ToolOutput { content: Content::Value(v), is_error: false, meta: None },
        Outcome::Object(json) => ToolOutput { content: Content::Object(json), is_error: false, meta: None },
        Outcome::Mutation(m) => {
            // A replayed receipt may hold a stored error response; it stays an error, and
            // carries the four false flags like every MCP result.
            let is_error = m.status >= 400;
            let content = if is_error { with_false_flags(m.body) } else { m.body };
            let mut meta = MetaObject::new();
            meta.insert(REPLAYED_META.into(), Value::Bool(m.replayed));
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

/// The server's self-description, built once per process (the SDK asks for it on every
/// request it serves).
static INFO: LazyLock<ServerConfig> = LazyLock::new(|| {
    ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(
            Implementation::new("helix-agent-api", env!("CARGO_PKG_VERSION")).with_title("Helix Agent API"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .with_instructions(INSTRUCTIONS)
});

impl ServerHandler for HelixMcp {
    fn get_info(&self) -> ServerConfig {
        INFO.clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(catalog::tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalog::tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The preflight admitted only catalog names; anything else is a protocol error.
        let spec = catalog::find(&request.name).ok_or_else(|| ErrorData::invalid_params("unknown tool", None))?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.call(spec, &arguments, call_context(&context)).await.into_result().into())
    }
}

impl HelixMcp {
    /// One tool call of a catalog tool: the SDK's `call_tool` and the transport's direct
    /// path (`super::direct_call`) both end here.
    pub(crate) async fn call(&self, spec: &catalog::ToolSpec, arguments: &Value, cx: CallContext) -> ToolOutput {
        let Some(principal) = cx.principal else {
            return self.error_output(&ApiError::AuthenticationRequired, &cx.request_id);
        };
        match self.dispatch(spec.op, &principal, arguments, cx.invocation).await {
            Ok(outcome) => framed(outcome),
            Err(err) => {
                tracing::info!(request_id = %cx.request_id, tool = spec.name, code = err.code(), "mcp tool refused");
                self.error_output(&err, &cx.request_id)
            }
        }
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
