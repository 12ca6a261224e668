//! Tool output schemas.
//!
//! Generated from the wire DTOs, the same types that serialize the results, so a published
//! schema cannot drift from the JSON served. A tool's outputSchema admits its success shape
//! or the MCP error result: some SDK clients (the TypeScript SDK) validate
//! `structuredContent` of `isError` results too. Objects stay open (no
//! `additionalProperties: false`) so adding a field does not break clients.

use serde_json::{Value, json};

use crate::domain::schema::output_schema_of;
use crate::domain::wire::McpErrorView;

/// A JSON Schema object (the SDK's `JsonObject`).
type JsonObject = serde_json::Map<String, Value>;

/// The output schema of a tool that answers `T` or an error result.
pub fn or_error<T: schemars::JsonSchema>() -> JsonObject {
    let Value::Object(root) =
        json!({ "type": "object", "anyOf": [output_schema_of::<T>(), output_schema_of::<McpErrorView>()] })
    else {
        unreachable!()
    };
    root
}

/// The output schema of a tool that never succeeds (the disabled command request).
pub fn error_only() -> JsonObject {
    let Value::Object(root) = output_schema_of::<McpErrorView>() else { unreachable!() };
    root
}
