//! `GET /openapi.json`: the OpenAPI 3.1 document of the REST surface, built from
//! [`routes::ROUTES`] and the same Rust types (and the same portable-schema rewrite) as
//! the handlers and the MCP schemas. A committed copy lives in `docs/openapi.json`.

mod examples;
mod links;
pub mod routes;

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::HeaderValue;
use http::header::CONTENT_TYPE;

use super::{AppState, Group, pipeline};
use serde_json::{Map, Value, json};

use crate::domain::scopes::all_oauth_scopes;
use crate::domain::wire::ErrorEnvelope;
use routes::{Lane, ROUTES, Route};

pub const PATH: &str = "/openapi.json";

/// The error statuses an operation may answer (all in the error schema): which apply
/// follows from its lane, its method and whether it reads a body or an `Idempotency-Key`.
fn errors(r: &Route) -> Vec<(u16, &'static str)> {
    let mut out = vec![(400, "Invalid request (a parameter, the body or a header)")];
    out.push((401, "Missing or invalid credential"));
    out.push((403, "Credential lacks the scope, the account link or the origin proof"));
    out.push((404, "Not found (or not the caller's)"));
    if r.request.is_some() {
        out.push((408, "The body did not arrive in time"));
    }
    if r.method != "get" {
        out.push((409, "Conflict with the current state (or a replay still in progress)"));
    }
    if r.request.is_some() {
        out.push((413, "Body too large"));
        out.push((415, "Not application/json"));
    }
    if r.idempotency_key {
        out.push((422, "This Idempotency-Key was used with a different request"));
    }
    out.push((429, "Rate limited (see Retry-After)"));
    out.push((503, "Temporarily unavailable (see Retry-After)"));
    out
}

/// No authentication; the pipeline gives it `X-Request-Id` and `Cache-Control: no-store`
/// like every other response (the document changes with each deploy).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(PATH, get(serve))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Discovery), pipeline))
        .with_state(state)
}

async fn serve() -> Response {
    ([(CONTENT_TYPE, HeaderValue::from_static("application/json"))], document_text()).into_response()
}

/// The document as served and committed: pretty JSON with a final newline.
pub fn document_text() -> String {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = serde_json::to_string_pretty(&document()).expect("the document is JSON");
        text.push('\n');
        text
    })
    .clone()
}

pub fn document() -> Value {
    let (mut paths, mut schemas) = (Map::new(), Map::new());
    let (name, error) = routes::response::<ErrorEnvelope>();
    schemas.insert(name, error);
    for r in ROUTES {
        let item = paths.entry(r.path).or_insert_with(|| json!({}));
        item[r.method] = operation(r, &mut schemas);
    }
    let scopes: Map<String, Value> =
        all_oauth_scopes().into_iter().map(|s| (s.to_owned(), Value::from(format!("The {s} scope")))).collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Helix Agent API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The REST lanes of the Helix Agent API. Every error answers `helix.agent_api.error.v1`; every response carries `X-Request-Id` and `Cache-Control: no-store`.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "headers": {
                "X-Request-Id": {"description": "The request's id, quoted in errors and logs.", "schema": {"type": "string"}},
                "Cache-Control": {"description": "Always `no-store`.", "schema": {"type": "string"}},
            },
            "responses": {"Error": {
                "description": "An error in `helix.agent_api.error.v1`.",
                "headers": headers(),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
            }},
            "securitySchemes": {
                "oauth2": {
                    "type": "oauth2",
                    "description": "Access tokens of the authorization server named by /.well-known/oauth-protected-resource.",
                    "flows": {"authorizationCode": {
                        "authorizationUrl": crate::http::oauth::dev_auth::AUTHORIZE_PATH,
                        "tokenUrl": crate::http::oauth::dev_auth::TOKEN_PATH,
                        "scopes": scopes,
                    }},
                },
                "sourceCredential": {"type": "http", "scheme": "bearer", "description": "A room source's own credential (producer ingress only)."},
                "connectorCredential": {"type": "http", "scheme": "bearer", "description": "An action connector's own credential (hac_…; the southbound connector routes only, never a source bearer)."},
                "session": {"type": "apiKey", "in": "cookie", "name": crate::http::pages::SESSION_COOKIE, "description": "The browser session; writes also need a same-origin proof (Origin or Sec-Fetch-Site)."},
            },
        },
    })
}

fn headers() -> Value {
    json!({
        "X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"},
        "Cache-Control": {"$ref": "#/components/headers/Cache-Control"},
    })
}

/// A `$ref` to the named schema, adding it to `components/schemas` the first time.
fn named(schema: routes::SchemaFn, schemas: &mut Map<String, Value>) -> Value {
    let (name, value) = schema();
    let previous = schemas.insert(name.clone(), value.clone());
    assert!(previous.is_none_or(|p| p == value), "two types are both named {name}");
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn operation(r: &Route, schemas: &mut Map<String, Value>) -> Value {
    let mut params: Vec<Value> = path_params(r.path)
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": routes::path_param(r.path, name)}))
        .collect();
    if let Some(query) = r.query {
        params.extend(query_params(query));
    }
    if r.idempotency_key {
        let (_, schema) = routes::response::<crate::domain::ids::IdempotencyKey>();
        params.push(json!({"name": "Idempotency-Key", "in": "header", "required": true,
            "description": "Replays of the same key answer the first outcome.", "schema": schema}));
    }
    let mut responses = Map::new();
    for (status, schema) in r.ok {
        let mut ok = json!({"description": "Success", "headers": headers(),
            "content": {"application/json": {"schema": named(*schema, schemas)}}});
        if let Some(links) = links::of(r.operation_id) {
            ok["links"] = links;
        }
        responses.insert(status.to_string(), ok);
    }
    let error = json!({"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"},
        "example": examples::error()}});
    for (status, description) in errors(r) {
        responses
            .insert(status.to_string(), json!({"description": description, "headers": headers(), "content": error}));
    }
    responses.insert("default".into(), json!({"$ref": "#/components/responses/Error"}));
    let security = match r.lane {
        Lane::Bearer(scopes) => json!([{"oauth2": scopes}]),
        Lane::SourceCredential => json!([{"sourceCredential": []}]),
        Lane::ConnectorCredential => json!([{"connectorCredential": []}]),
        Lane::Cookie => json!([{"session": []}]),
    };
    let mut op = json!({
        "operationId": r.operation_id,
        "summary": r.summary,
        "parameters": params,
        "security": security,
        "responses": responses,
    });
    if let Some(schema) = r.request {
        let mut body = json!({"schema": named(schema, schemas)});
        if let Some(example) = examples::request(r.operation_id) {
            body["example"] = example;
        }
        op["requestBody"] = json!({"required": true, "content": {"application/json": body}});
    }
    op
}

/// Each property of a query type as an optional query parameter (its `null` branch, which
/// a query string cannot spell, left out).
fn query_params(query: routes::SchemaFn) -> Vec<Value> {
    let (_, schema) = query();
    let Some(Value::Object(props)) = schema.get("properties") else { panic!("a query type is an object") };
    props
        .iter()
        .map(|(name, prop)| {
            let mut prop = prop.clone();
            if let Some(Value::Array(branches)) = prop.get("anyOf") {
                let some: Vec<&Value> = branches.iter().filter(|b| b.get("type") != Some(&json!("null"))).collect();
                if let [one] = some[..] {
                    prop = one.clone();
                }
            }
            let mut param = json!({"name": name, "in": "query", "required": false});
            if let Some(d) = prop.as_object_mut().and_then(|p| p.remove("description")) {
                param["description"] = d;
            }
            param["schema"] = prop;
            param
        })
        .collect()
}

fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}

#[cfg(test)]
mod tests;
