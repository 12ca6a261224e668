//! The JSON-RPC envelope preflight: runs on the raw body before authentication and
//! before the MCP SDK sees anything. A refusal is an HTTP 400 JSON-RPC error with
//! `id: null` and a fixed message: nothing from the request is ever echoed. Arguments
//! that do not match the tool's input schema are `-32602 Invalid params` naming the path
//! and the rule (from the schema alone, see [`super::validate`]).
//! Pure: no I/O, no state beyond the static tool catalogs.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::catalog::{self, Catalog};
use super::validate::{Violation, check as check_schema};
use crate::http::redact::{identifier_carries_credential, looks_like_credential};

/// Longest JSON-RPC string id admitted.
pub const MAX_ID_CHARS: usize = 128;

/// Client-to-server request methods of the MCP revisions served (the SDK answers
/// the ones this server does not implement with "method not found").
pub const REQUEST_METHODS: &[&str] = &[
    "initialize",
    "server/discover",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

pub const NOTIFICATION_METHODS: &[&str] = &[
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

/// Why an envelope was refused. Each maps to one fixed message, except
/// [`Rejection::InvalidParams`], whose message is built from the schema's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    Parse,
    Batch,
    NotObject,
    DuplicateKey,
    UnknownMember,
    Version,
    Id,
    IdPresence,
    Method,
    Params,
    CallParams,
    ToolName,
    /// Credential-shaped arguments: the static refusal the contract asks for.
    Arguments,
    /// Arguments that do not match the tool's input schema: where and which rule.
    InvalidParams(Violation),
}

impl Rejection {
    /// JSON-RPC error code: -32700 for a body that is not JSON, -32602 for arguments that
    /// do not match the input schema, else -32600.
    pub fn code(&self) -> i64 {
        match self {
            Rejection::Parse => -32700,
            Rejection::InvalidParams(_) => -32602,
            _ => -32600,
        }
    }

    pub fn message(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Rejection::Parse => "Parse error: the body is not valid JSON",
            Rejection::Batch => "Invalid Request: batches are not accepted",
            Rejection::NotObject => "Invalid Request: the body must be one JSON-RPC object",
            Rejection::DuplicateKey => "Invalid Request: duplicate object key",
            Rejection::UnknownMember => "Invalid Request: unknown or misplaced envelope member",
            Rejection::Version => "Invalid Request: jsonrpc must be \"2.0\"",
            Rejection::Id => "Invalid Request: id must be an integer or a short opaque string",
            Rejection::IdPresence => "Invalid Request: requests carry an id, notifications do not",
            Rejection::Method => "Invalid Request: unknown method",
            Rejection::Params => "Invalid Request: params must be an object",
            Rejection::CallParams => "Invalid Request: tools/call params admit only name, arguments and _meta",
            Rejection::ToolName => "Invalid Request: unknown tool",
            Rejection::Arguments => "Invalid Request: arguments do not match the tool's inputSchema",
            Rejection::InvalidParams(v) => return Cow::Owned(format!("Invalid params: {v}")),
        })
    }

    pub fn body(&self) -> Value {
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
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
    if let Some(known) = REQUEST_METHODS.iter().find(|m| **m == method) {
        if !msg.contains_key("id") {
            return Err(Rejection::IdPresence);
        }
        if *known == "tools/call" {
            check_tool_call(params.ok_or(Rejection::CallParams)?, tools)?;
        }
        return Ok(Envelope::Request { method: known });
    }
    if NOTIFICATION_METHODS.contains(&method) {
        if msg.contains_key("id") {
            return Err(Rejection::IdPresence);
        }
        return Ok(Envelope::Notification);
    }
    Err(Rejection::Method)
}

fn check_id(id: &Value) -> Result<(), Rejection> {
    match id {
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
        Value::String(s) if !s.is_empty() && s.chars().count() <= MAX_ID_CHARS && !looks_like_credential(s) => Ok(()),
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

fn check_tool_call(params: &Map<String, Value>, tools: &'static Catalog) -> Result<(), Rejection> {
    if params.keys().any(|k| !matches!(k.as_str(), "name" | "arguments" | "_meta")) {
        return Err(Rejection::CallParams);
    }
    if params.get("_meta").is_some_and(|m| !m.is_object()) {
        return Err(Rejection::CallParams);
    }
    let name = params.get("name").and_then(Value::as_str).ok_or(Rejection::ToolName)?;
    // Only the catalog's own names pass (some are 32-character identifiers, which the
    // credential rule alone would take for a secret); any other name is refused the same way.
    let schema = tools.input_schema(name).ok_or(Rejection::ToolName)?;
    let empty = Value::Object(Map::new());
    let arguments = params.get("arguments").unwrap_or(&empty);
    // The credential check comes first, so credential-shaped arguments always get the
    // static refusal, whatever else is wrong with them.
    if carries_credential(None, &without_admitted_claim(name, arguments)) {
        return Err(Rejection::Arguments);
    }
    check_schema(schema, arguments).map_err(Rejection::InvalidParams)
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
                Rejection::Id,
            ),
            (json!({"jsonrpc": "2.0", "id": 1, "method": "tools/exec"}), Rejection::Method),
            (json!({"jsonrpc": "2.0", "method": "ping"}), Rejection::IdPresence),
            (json!({"jsonrpc": "2.0", "id": 1, "method": "notifications/initialized"}), Rejection::IdPresence),
            (json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}), Rejection::Params),
        ];
        for (msg, want) in cases {
            assert_eq!(run(msg.clone()), Err(want), "{msg}");
        }
        assert_eq!(check(b"{\"jsonrpc\":\"2.0\""), Err(Rejection::Parse));
        assert_eq!(check(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#), Err(Rejection::DuplicateKey));
    }

    #[test]
    fn tool_calls_are_checked_against_the_catalog_and_input_schema() {
        let with_params = |p: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": p});
        assert_eq!(
            run(with_params(json!({"name": "helix_run_inspect", "arguments": {"run_id": "r"}, "task": {}}))),
            Err(Rejection::CallParams)
        );
        assert_eq!(run(with_params(json!({"name": "helix_shell", "arguments": {}}))), Err(Rejection::ToolName));
        assert_eq!(run(with_params(json!({"name": "sk-live-0123456789"}))), Err(Rejection::ToolName));
        let start = |request: Value| {
            with_params(
                json!({"name": "helix_run_start", "arguments": {"idempotency_key": "k-12345678", "request": request}}),
            )
        };
        assert!(run(start(json!({"objective": "x", "budget": {"max_steps": 3}}))).is_ok());
        let named = |msg: Value| match run(msg) {
            Err(r @ Rejection::InvalidParams(_)) => {
                assert_eq!((r.code(), r.body()["id"].clone()), (-32602, Value::Null));
                r.message().into_owned()
            }
            other => panic!("expected invalid params, got {other:?}"),
        };
        let run_fields = "unknown field (allowed: run_id)";
        let request_fields =
            "unknown field (allowed: budget, completion_contract, constraints, database_scope, objective)";
        for (msg, want) in [
            (call(json!({"run_id": "r", "owner": "me"})), format!("arguments: {run_fields}")),
            (call(json!({})), "run_id: missing".into()),
            (call(json!({"run_id": 5})), "run_id: must be a string".into()),
            (
                with_params(json!({"name": "helix_run_inspect", "arguments": [1]})),
                "arguments: must be an object".into(),
            ),
            (start(json!({"objective": "x", "tenant": "t"})), format!("request: {request_fields}")),
            (
                start(json!({"objective": "x", "budget": {"max_step": 3}})),
                "request.budget: unknown field (allowed: expires_in_seconds, max_steps)".into(),
            ),
            (
                start(json!({"objective": "x", "budget": {"max_steps": "3"}})),
                "request.budget.max_steps: must be an integer or null".into(),
            ),
            (
                start(json!({"objective": "x", "budget": {"max_steps": -3}})),
                "request.budget.max_steps: must be at least 1".into(),
            ),
            (start(json!({"constraints": []})), "request.objective: missing".into()),
            (
                start(json!({"objective": "x", "constraints": ["a", 2]})),
                "request.constraints[1]: must be a string".into(),
            ),
        ] {
            assert_eq!(named(msg.clone()), format!("Invalid params: {want}"), "{msg}");
        }
    }

    /// An argument error is built from the schema: no value, and no unknown key, of the call.
    #[test]
    fn argument_errors_never_repeat_what_the_caller_sent() {
        let start = |request: Value| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params":
            {"name": "helix_run_start", "arguments": {"idempotency_key": "k-12345678", "request": request}}})
        };
        for (msg, caller) in [
            (start(json!({"objective": "x", "tenant_of_record": "t"})), "tenant_of_record"),
            (start(json!({"objective": 31337})), "31337"),
            (start(json!({"objective": "x", "budget": {"max_steps": "many_many_steps"}})), "many_many_steps"),
            (start(json!({"objective": "x", "budget": {"max_steps": 2.75}})), "2.75"),
        ] {
            let r = run(msg).expect_err("refused");
            assert!(matches!(r, Rejection::InvalidParams(_)), "{r:?}");
            assert!(!r.body().to_string().contains(caller), "{} repeats {caller}", r.body());
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
    fn messages_never_echo_input() {
        for r in [Rejection::Parse, Rejection::Id, Rejection::ToolName, Rejection::Arguments] {
            assert!(matches!(r.message(), Cow::Borrowed(_)), "{r:?} has a fixed message");
            let body = r.body();
            assert_eq!(body["id"], Value::Null);
            assert_eq!(body["error"]["message"], *r.message());
        }
    }
}
