//! The JSON-RPC envelope preflight: runs on the raw body before authentication and
//! before the MCP SDK sees anything. Its refusals answer as the official TypeScript SDK's
//! stateless server does (HTTP status, JSON-RPC code, `id`): a body that is not one valid
//! JSON-RPC message is HTTP 400 with `id: null`; a well-formed request for an unknown
//! method, an unknown tool or malformed `tools/call` params is a JSON-RPC error with the
//! request's id; the contract's credential-shaped refusals are HTTP 400, `-32600`, `id:
//! null`. Every message is fixed: nothing from the request is echoed but a checked id.
//! Arguments off the tool's input schema are not refused here: they are a tool result
//! (SEP-1303, [`super::server`]). Pure: no I/O, no state beyond the static tool catalogs.

use std::borrow::Cow;
use std::fmt;

use http::StatusCode;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::catalog::{self, Catalog};
use crate::domain::credential::secret_value;
use crate::http::redact::{identifier_carries_credential, is_trace_context_id, looks_like_credential};

/// Longest JSON-RPC string id admitted.
pub const MAX_ID_CHARS: usize = 128;

/// Client-to-server request methods of the MCP revisions served (the SDK answers
/// the ones this server does not implement with "method not found"; any other method
/// is answered so here).
pub const REQUEST_METHODS: &[&str] = &[
    "initialize",
    "server/discover",
    "ping",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// Why an envelope was refused. Each maps to one fixed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Not JSON.
    Parse,
    // Not one valid JSON-RPC message (HTTP 400, `-32700`, `id: null`, as the TypeScript SDK).
    Batch,
    NotObject,
    DuplicateKey,
    UnknownMember,
    Version,
    Id,
    Method,
    Params,
    Meta,
    // The contract's static refusals of credential-shaped values (`-32600`, `id: null`).
    CredentialId,
    ToolName,
    Arguments,
    /// A credential-shaped `_meta` of a tool call: the same static refusal.
    MetaCredential,
    // A well-formed request refused with its own id (HTTP 200).
    /// A request method this server does not know (`-32601`).
    MethodNotFound(Value),
    /// `tools/call` params that are not `name` (a string), `arguments` (an object) and
    /// `_meta` (`-32602`).
    CallParams(Value),
    /// A `tools/call` of a tool not in the catalog (`-32602`, the MCP spec's protocol error).
    UnknownTool(Value),
}

impl Rejection {
    /// JSON-RPC error code: `-32700` for a body that is not one valid JSON-RPC message,
    /// `-32600` for the credential refusals, `-32601`/`-32602` for a refused request.
    pub fn code(&self) -> i64 {
        match self {
            Rejection::CredentialId | Rejection::ToolName | Rejection::Arguments | Rejection::MetaCredential => -32600,
            Rejection::MethodNotFound(_) => -32601,
            Rejection::CallParams(_) | Rejection::UnknownTool(_) => -32602,
            _ => -32700,
        }
    }

    /// HTTP 200 for a refused request (a JSON-RPC error answering its id), else 400.
    pub fn status(&self) -> StatusCode {
        if self.id().is_null() { StatusCode::BAD_REQUEST } else { StatusCode::OK }
    }

    /// The id the answer carries: the request's own (already checked: an integer or a
    /// short string that is not credential-shaped) when it is a refused request, else null.
    pub fn id(&self) -> &Value {
        match self {
            Rejection::MethodNotFound(id) | Rejection::CallParams(id) | Rejection::UnknownTool(id) => id,
            _ => &Value::Null,
        }
    }

    pub fn message(&self) -> &'static str {
        match self {
            Rejection::Parse => "Parse error: the body is not valid JSON",
            Rejection::Batch => "Parse error: invalid JSON-RPC message (batches are not accepted)",
            Rejection::NotObject => "Parse error: invalid JSON-RPC message (the body must be one JSON-RPC object)",
            Rejection::DuplicateKey => "Parse error: invalid JSON-RPC message (duplicate object key)",
            Rejection::UnknownMember => "Parse error: invalid JSON-RPC message (unknown or misplaced envelope member)",
            Rejection::Version => "Parse error: invalid JSON-RPC message (jsonrpc must be \"2.0\")",
            Rejection::Id => "Parse error: invalid JSON-RPC message (id must be an integer or a short string)",
            Rejection::Method => "Parse error: invalid JSON-RPC message (method must be a string)",
            Rejection::Params => "Parse error: invalid JSON-RPC message (params must be an object)",
            Rejection::Meta => "Parse error: invalid JSON-RPC message (_meta must be an object)",
            Rejection::CredentialId => "Invalid Request: id must be an integer or a short opaque string",
            Rejection::ToolName => "Invalid Request: unknown tool",
            Rejection::Arguments => "Invalid Request: arguments do not match the tool's inputSchema",
            Rejection::MetaCredential => "Invalid Request: _meta must not carry a credential",
            Rejection::MethodNotFound(_) => "Method not found",
            Rejection::CallParams(_) => {
                "Invalid params: tools/call params admit only name (a string), arguments (an object) and _meta"
            }
            Rejection::UnknownTool(_) => "Unknown tool",
        }
    }

    pub fn body(&self) -> Value {
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": self.id(),
            "error": { "code": self.code(), "message": self.message() },
        })
    }
}

/// What the preflight learned about an admitted message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Envelope {
    Request { method: &'static str },
    Notification,
    Response,
}

/// An admitted message: what the preflight learned, and the message it parsed (so the
/// transport reads the body once; nothing downstream parses it again to learn the same).
#[derive(Debug, Clone)]
pub struct Checked {
    pub envelope: Envelope,
    pub message: Map<String, Value>,
}

/// Checks one raw JSON-RPC message against the envelope rules and the `/mcp` catalog.
pub fn check(body: &[u8]) -> Result<Envelope, Rejection> {
    check_message(body, &catalog::MCP).map(|c| c.envelope)
}

/// Checks one raw JSON-RPC message against the envelope rules and a front's catalog,
/// keeping the parsed message.
pub fn check_message(body: &[u8], tools: &'static Catalog) -> Result<Checked, Rejection> {
    let value = parse_no_duplicates(body)?;
    let msg = match value {
        Value::Object(m) => m,
        Value::Array(_) => return Err(Rejection::Batch),
        _ => return Err(Rejection::NotObject),
    };
    let envelope = check_envelope(&msg, tools)?;
    Ok(Checked { envelope, message: msg })
}

fn check_envelope(msg: &Map<String, Value>, tools: &'static Catalog) -> Result<Envelope, Rejection> {
    if msg.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Err(Rejection::Version);
    }
    if let Some(id) = msg.get("id") {
        check_id(id)?;
    }
    let Some(method) = msg.get("method") else {
        return check_response(msg);
    };
    if msg.keys().any(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "method" | "params")) {
        return Err(Rejection::UnknownMember);
    }
    let method = method.as_str().ok_or(Rejection::Method)?;
    let params = match msg.get("params") {
        None => None,
        Some(Value::Object(p)) => Some(p),
        Some(_) => return Err(Rejection::Params),
    };
    if params.and_then(|p| p.get("_meta")).is_some_and(|m| !m.is_object()) {
        return Err(Rejection::Meta);
    }
    // A message without an id is a notification, whatever its method: nothing answers it.
    let Some(id) = msg.get("id") else {
        return Ok(Envelope::Notification);
    };
    let known = REQUEST_METHODS.iter().find(|m| **m == method).ok_or_else(|| Rejection::MethodNotFound(id.clone()))?;
    if *known == "tools/call" {
        check_tool_call(id, params, tools)?;
    }
    Ok(Envelope::Request { method: known })
}

fn check_id(id: &Value) -> Result<(), Rejection> {
    match id {
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
        Value::String(s) if s.is_empty() || s.chars().count() > MAX_ID_CHARS => Err(Rejection::Id),
        Value::String(s) if looks_like_credential(s) => Err(Rejection::CredentialId),
        Value::String(_) => Ok(()),
        _ => Err(Rejection::Id),
    }
}

fn check_response(msg: &Map<String, Value>) -> Result<Envelope, Rejection> {
    let has = |k: &str| msg.contains_key(k);
    let shape_ok = has("id") && (has("result") != has("error"));
    if !shape_ok || msg.keys().any(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "result" | "error")) {
        return Err(Rejection::UnknownMember);
    }
    Ok(Envelope::Response)
}

/// A `tools/call`'s params. The credential refusals come first (a credential-shaped
/// tool name, argument or unknown params key), so such a call always gets the static
/// refusal, whatever else is wrong with it; then the params' shape, then the tool name.
fn check_tool_call(id: &Value, params: Option<&Map<String, Value>>, tools: &'static Catalog) -> Result<(), Rejection> {
    let params = params.ok_or_else(|| Rejection::CallParams(id.clone()))?;
    let known = |k: &str| matches!(k, "name" | "arguments" | "_meta");
    let name = params.get("name").and_then(Value::as_str);
    let spec = name.and_then(|n| tools.find(n));
    if spec.is_none() && name.is_some_and(looks_like_credential) {
        return Err(Rejection::ToolName);
    }
    let empty = Value::Object(Map::new());
    let arguments = params.get("arguments").unwrap_or(&empty);
    let admitted = without_admitted_claim(spec.map_or("", |s| s.name), arguments);
    if carries_credential(None, &admitted) || params.keys().any(|k| !known(k) && looks_like_credential(k)) {
        return Err(Rejection::Arguments);
    }
    if params.get("_meta").and_then(Value::as_object).is_some_and(meta_carries_credential) {
        return Err(Rejection::MetaCredential);
    }
    if params.keys().any(|k| !known(k)) || name.is_none() || !arguments.is_object() {
        return Err(Rejection::CallParams(id.clone()));
    }
    // Only the catalog's own names pass (some are 32-character identifiers, which the
    // credential rule alone would take for a secret).
    spec.map(|_| ()).ok_or_else(|| Rejection::UnknownTool(id.clone()))
}

/// True when a tool call's `_meta` carries a credential: the arguments' rule, and a
/// secret-named member with a value (`{"api_key": "…"}`). Two members are read by their
/// own grammar: `progressToken` is an opaque identifier (random runs are what ids are made
/// of) and a W3C `traceparent` is public by design (its trace id is a 32-digit hex run).
fn meta_carries_credential(meta: &Map<String, Value>) -> bool {
    meta.iter().any(|(key, value)| match (key.as_str(), value) {
        ("traceparent", Value::String(s)) if is_trace_context_id(s) => false,
        ("progressToken", Value::String(s)) => {
            identifier_carries_credential(s) || crate::domain::room::is_claim_handle(s)
        }
        (_, Value::String(s)) if secret_value(key, s) => true,
        _ => crate::domain::room::credential_shaped(key) || carries_credential(Some(key), value),
    })
}

/// The one credential-shaped argument admitted: the browser-issued chat claim handle,
/// exactly in `request.claim_handle` of the claim tool and exactly in its own shape.
/// Anywhere else (another tool, another argument, another shape) it is refused.
/// Only that tool's arguments are copied (to take the handle out); the rest are borrowed.
fn without_admitted_claim<'a>(tool: &str, arguments: &'a Value) -> Cow<'a, Value> {
    if tool != super::tools::rooms::CLAIM_TOOL {
        return Cow::Borrowed(arguments);
    }
    let mut args = arguments.clone();
    if let Some(request) = args.get_mut("request").and_then(Value::as_object_mut)
        && request.get("claim_handle").and_then(Value::as_str).is_some_and(crate::domain::room::is_claim_handle)
    {
        request.remove("claim_handle");
    }
    Cow::Owned(args)
}

/// Arguments that are opaque identifiers with their own grammar; every other string
/// (and every object key, at any depth) is free text.
const IDENTIFIER_ARGUMENTS: &[&str] = &["run_id", "idempotency_key", "question_id", "room_id", "binding_ref", "cursor"];

/// True when any string of the arguments carries a credential (the shared rule of
/// `http::redact`): such a call is refused before authentication, like a
/// credential-shaped id or tool name, and nothing of it reaches the services or a log.
fn carries_credential(key: Option<&str>, value: &Value) -> bool {
    match value {
        // A claim handle is a credential wherever it appears, identifiers included (its one
        // admitted place is removed before this check), random-looking or not.
        Value::String(s) if key.is_some_and(|k| IDENTIFIER_ARGUMENTS.contains(&k)) => {
            identifier_carries_credential(s) || crate::domain::room::is_claim_handle(s)
        }
        Value::String(s) => crate::domain::room::credential_shaped(s),
        Value::Array(items) => items.iter().any(|v| carries_credential(None, v)),
        Value::Object(map) => {
            map.iter().any(|(k, v)| crate::domain::room::credential_shaped(k) || carries_credential(Some(k), v))
        }
        _ => false,
    }
}

/// Parses JSON into a `Value`, refusing duplicate object keys at any depth (a
/// duplicate would let the preflight and the SDK read different values).
fn parse_no_duplicates(body: &[u8]) -> Result<Value, Rejection> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = StrictValue
        .deserialize(&mut de)
        .map_err(|e| if e.to_string().starts_with(DUPLICATE) { Rejection::DuplicateKey } else { Rejection::Parse })?;
    de.end().map_err(|_| Rejection::Parse)?;
    Ok(value)
}

const DUPLICATE: &str = "duplicate object key";

struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue)?;
            if out.insert(key, value).is_some() {
                return Err(de::Error::custom(DUPLICATE));
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value) -> Result<Envelope, Rejection> {
        check(v.to_string().as_bytes())
    }

    fn call(arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "helix_run_inspect", "arguments": arguments}})
    }

    #[test]
    fn well_formed_messages_pass() {
        assert_eq!(
            run(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})),
            Ok(Envelope::Request { method: "initialize" })
        );
        assert_eq!(run(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})), Ok(Envelope::Notification));
        assert_eq!(run(call(json!({"run_id": "run_abcdefgh"}))), Ok(Envelope::Request { method: "tools/call" }));
        assert_eq!(run(json!({"jsonrpc": "2.0", "id": "req-1", "result": {}})), Ok(Envelope::Response));
    }

    #[test]
    fn envelope_violations_are_refused() {
        let cases = [
            (json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]), Rejection::Batch),
            (json!("ping"), Rejection::NotObject),
            (json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": 1}), Rejection::UnknownMember),
            (json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}), Rejection::Version),
            (json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}), Rejection::Id),
            (json!({"jsonrpc": "2.0", "id": null, "method": "ping"}), Rejection::Id),
            (json!({"jsonrpc": "2.0", "id": "x".repeat(129), "method": "ping"}), Rejection::Id),
            (
                json!({"jsonrpc": "2.0", "id": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", "method": "ping"}),
                Rejection::CredentialId,
            ),
            (json!({"jsonrpc": "2.0", "id": 1, "method": 5}), Rejection::Method),
            (json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}), Rejection::Params),
            (json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": 1}}), Rejection::Meta),
            // A well-formed request for an unknown method (a notification's included) is
            // refused with its own id.
            (json!({"jsonrpc": "2.0", "id": 1, "method": "tools/exec"}), Rejection::MethodNotFound(json!(1))),
            (
                json!({"jsonrpc": "2.0", "id": "n-1", "method": "notifications/initialized"}),
                Rejection::MethodNotFound(json!("n-1")),
            ),
        ];
        for (msg, want) in cases {
            assert_eq!(run(msg.clone()), Err(want), "{msg}");
        }
        assert_eq!(check(b"{\"jsonrpc\":\"2.0\""), Err(Rejection::Parse));
        assert_eq!(check(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#), Err(Rejection::DuplicateKey));
        // Without an id a message is a notification, whatever its method: nothing answers it.
        for method in ["ping", "tools/call", "foo/bar"] {
            assert_eq!(run(json!({"jsonrpc": "2.0", "method": method})), Ok(Envelope::Notification), "{method}");
        }
    }

    #[test]
    fn each_refusal_answers_as_the_typescript_sdk_does() {
        for (r, status, code, id) in [
            (Rejection::Parse, 400, -32700, Value::Null),
            (Rejection::Batch, 400, -32700, Value::Null),
            (Rejection::Id, 400, -32700, Value::Null),
            (Rejection::MethodNotFound(json!(4)), 200, -32601, json!(4)),
            (Rejection::CallParams(json!("c-1")), 200, -32602, json!("c-1")),
            (Rejection::UnknownTool(json!(9)), 200, -32602, json!(9)),
            (Rejection::CredentialId, 400, -32600, Value::Null),
            (Rejection::ToolName, 400, -32600, Value::Null),
            (Rejection::Arguments, 400, -32600, Value::Null),
        ] {
            assert_eq!(
                (r.status().as_u16(), r.body()["error"]["code"].clone(), r.body()["id"].clone()),
                (status, json!(code), id),
                "{r:?}"
            );
        }
    }

    #[test]
    fn tool_calls_are_checked_against_the_catalog() {
        let with_params = |p: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": p});
        let bad_params = Err(Rejection::CallParams(json!(1)));
        assert_eq!(
            run(with_params(json!({"name": "helix_run_inspect", "arguments": {"run_id": "r"}, "task": {}}))),
            bad_params
        );
        assert_eq!(run(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})), bad_params);
        assert_eq!(run(with_params(json!({"arguments": {}}))), bad_params);
        assert_eq!(run(with_params(json!({"name": 5}))), bad_params);
        assert_eq!(run(with_params(json!({"name": "helix_run_inspect", "arguments": [1]}))), bad_params);
        assert_eq!(
            run(with_params(json!({"name": "helix_shell", "arguments": {}}))),
            Err(Rejection::UnknownTool(json!(1)))
        );
        assert_eq!(run(with_params(json!({"name": "sk-live-0123456789"}))), Err(Rejection::ToolName));
        // Arguments off the input schema pass the preflight: they are a tool result.
        for arguments in [json!({}), json!({"run_id": 5}), json!({"run_id": "r", "owner": "me"})] {
            assert_eq!(run(call(arguments)), Ok(Envelope::Request { method: "tools/call" }));
        }
    }

    #[test]
    fn credential_shaped_argument_values_are_refused() {
        let with_params = |p: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": p});
        let start = |key: &str, request: Value| {
            with_params(json!({"name": "helix_run_start", "arguments": {"idempotency_key": key, "request": request}}))
        };
        let cont = |answer: Value| {
            with_params(
                json!({"name": "helix_run_continue", "arguments": {"run_id": "run_0123456789abcdef0123456789abcdef",
                "idempotency_key": "conf-py-cont-0123456789abcdef0123456789abcdef",
                "request": {"expected_version": 2, "answers": [{"question_id": "q1", "value": answer}]}}}),
            )
        };
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
        for refused in [
            start("k-12345678", json!({"objective": format!("Summarise {jwt}")})),
            start("k-12345678", json!({"objective": "x", "constraints": ["Authorization: Bearer abcdefgh12345678"]})),
            start("sk-live-0123456789", json!({"objective": "x"})),
            start("k-12345678", json!({"objective": "x", "database_scope": ["ghp_0123456789abcdef"]})),
            cont(json!("password=hunter2hunter2")),
            cont(json!({"nested": ["sk-live-abcdef"]})),
            cont(json!({jwt: true})),
            call(json!({"run_id": jwt})),
            // Credential-shaped and also off-schema (an unknown key, a wrong type): still the
            // static refusal, never a named one.
            start("k-12345678", json!({"objective": "x", jwt: 1})),
            start("k-12345678", json!({"objective": 5, "note": "sk-live-0123456789abcdef"})),
            with_params(json!({"name": "helix_run_inspect", "arguments": [jwt]})),
            // In an unknown tool's arguments, or as an unknown params key, too.
            with_params(json!({"name": "helix_nope", "arguments": {"run_id": jwt}})),
            with_params(json!({"name": "helix_run_inspect", "arguments": {"run_id": "r"}, jwt: 1})),
        ] {
            assert_eq!(run(refused.clone()), Err(Rejection::Arguments), "{refused}");
        }
        for admitted in [
            start("conf-py-start-0123456789abcdef0123456789abcdef", json!({"objective": "How do bearer tokens work?"})),
            cont(json!({"include": false, "note": "the password policy is out of scope"})),
        ] {
            assert_eq!(run(admitted.clone()), Ok(Envelope::Request { method: "tools/call" }), "{admitted}");
        }
    }

    #[test]
    fn a_claim_handle_is_admitted_only_in_its_claim_tool_request() {
        let handle = format!("hcc_{}", "ab".repeat(32));
        let call_of = |name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let run_id = "run_0123456789abcdef0123456789abcdef";
        let admitted =
            call_of("helix_room_claim_chat_binding", json!({"request": {"claim_handle": handle, "run_id": run_id}}));
        assert_eq!(run(admitted), Ok(Envelope::Request { method: "tools/call" }));
        for refused in [
            call_of("helix_room_claim_chat_binding", json!({"request": {"claim_handle": handle, "run_id": handle}})),
            call_of("helix_room_inspect", json!({"room_id": handle})),
            call_of("helix_room_unbind_chat", json!({"binding_ref": handle})),
            call_of("helix_run_inspect", json!({"run_id": handle})),
            call_of("helix_room_create", json!({"idempotency_key": "k-12345678", "request": {"name": handle}})),
        ] {
            assert_eq!(run(refused.clone()), Err(Rejection::Arguments), "{refused}");
        }
    }

    #[test]
    fn a_credential_shaped_meta_of_a_tool_call_is_refused() {
        let with_meta = |meta: Value| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "helix_run_inspect", "arguments": {"run_id": "run_abcdefgh"}, "_meta": meta}})
        };
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
        let handle = format!("hcc_{}", "ab".repeat(32));
        for meta in [
            json!({"note": jwt}),
            json!({"authorization": "Bearer abcdefgh12345678"}),
            json!({"api_key": "hunter2hunter2"}),
            json!({"vendor/x": {"deep": ["sk-live-0123456789abcdef"]}}),
            json!({jwt: 1}),
            json!({"progressToken": jwt}),
            json!({"progressToken": handle}),
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "key": "ghp_0123456789abcdef"}),
            json!({"traceparent": format!("Bearer {}", "a1".repeat(20))}),
        ] {
            let r = run(with_meta(meta.clone())).expect_err("refused");
            assert_eq!(r, Rejection::MetaCredential, "{meta}");
            assert_eq!((r.code(), r.body()["id"].clone()), (-32600, Value::Null));
            assert!(!r.body().to_string().contains("hunter2") && !r.body().to_string().contains("eyJ"));
        }
        // Credential-shaped arguments keep their own refusal, whatever `_meta` holds.
        let both = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "helix_run_inspect", "arguments": {"run_id": jwt}, "_meta": {"note": jwt}}});
        assert_eq!(run(both), Err(Rejection::Arguments));
        // Credential-shaped `_meta` wins over arguments that are merely off the schema.
        let off_schema = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "helix_run_inspect", "arguments": {}, "_meta": {"note": jwt}}});
        assert_eq!(run(off_schema), Err(Rejection::MetaCredential));
        for meta in [
            json!({}),
            json!({"progressToken": 7}),
            json!({"progressToken": "0123456789abcdef0123456789abcdef"}),
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "2.3.0"},
                "io.modelcontextprotocol/clientCapabilities": {}}),
            json!({"note": "the password policy is out of scope"}),
        ] {
            assert_eq!(run(with_meta(meta.clone())), Ok(Envelope::Request { method: "tools/call" }), "{meta}");
        }
    }

    #[test]
    fn messages_never_echo_input() {
        for r in [
            Rejection::Parse,
            Rejection::Id,
            Rejection::CredentialId,
            Rejection::ToolName,
            Rejection::Arguments,
            Rejection::MetaCredential,
        ] {
            let body = r.body();
            assert_eq!(body["id"], Value::Null);
            assert_eq!(body["error"]["message"], *r.message());
        }
    }
}
