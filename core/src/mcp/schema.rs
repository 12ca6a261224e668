//! JSON Schemas of the MCP facade: input schemas generated from the strict argument
//! structs (inlined, so clients without `$ref` support read them), and the small
//! validator the preflight applies to `tools/call` arguments. The validator knows
//! exactly the keywords our published schemas use; a unit test keeps it that way.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// Keywords that only annotate (no assertion).
#[cfg(test)]
const ANNOTATIONS: &[&str] =
    &["title", "description", "format", "default", "examples", "readOnly", "writeOnly", "deprecated"];

/// Assertion and applicator keywords [`validate`] implements.
#[cfg(test)]
pub(crate) const SUPPORTED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "oneOf",
    "allOf",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
];

/// The input schema of an argument struct: draft 2020-12 keywords, subschemas inlined,
/// no `$schema`/`title`/`description` at the root (the tool describes itself), `true`
/// subschemas spelled `{}` (some hosts reject boolean schemas), and no integer `format`
/// (`uint64` is not a JSON Schema format; strict validators refuse unknown ones).
pub fn input_schema<T: JsonSchema>() -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).expect("schemars output is JSON");
    spell_out_boolean_schemas(&mut value);
    drop_integer_formats(&mut value);
    let Value::Object(mut root) = value else { panic!("argument schemas are objects") };
    for noise in ["$schema", "title", "description"] {
        root.remove(noise);
    }
    assert_eq!(root.get("type"), Some(&Value::from("object")), "MCP input schemas have root type object");
    root
}

/// The schema of a wire DTO as served: the serialize contract (a field that is always
/// present is required, `null` included), subschemas inlined, no root `$schema`/`title`,
/// `true` subschemas spelled `{}`, and no `format` on integers (`uint64` and friends
/// are not JSON Schema formats; strict validators refuse unknown ones).
pub fn output_schema_of<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().for_serialize().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).expect("schemars output is JSON");
    spell_out_boolean_schemas(&mut value);
    drop_integer_formats(&mut value);
    if let Value::Object(root) = &mut value {
        for noise in ["$schema", "title"] {
            root.remove(noise);
        }
    }
    value
}

fn drop_integer_formats(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let integer = match map.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer {
        map.remove("format");
    }
    for (key, sub) in map.iter_mut() {
        match (key.as_str(), sub) {
            ("properties" | "$defs", Value::Object(props)) => props.values_mut().for_each(drop_integer_formats),
            ("anyOf" | "oneOf" | "allOf", Value::Array(list)) => list.iter_mut().for_each(drop_integer_formats),
            ("items" | "additionalProperties", sub) => drop_integer_formats(sub),
            _ => {}
        }
    }
}

fn spell_out_boolean_schemas(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    for (key, sub) in map.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" => {
                if let Value::Object(props) = sub {
                    for s in props.values_mut() {
                        if *s == Value::Bool(true) {
                            *s = Value::Object(Map::new());
                        }
                        spell_out_boolean_schemas(s);
                    }
                }
            }
            "items" | "additionalProperties" if *sub == Value::Bool(true) => *sub = Value::Object(Map::new()),
            "anyOf" | "oneOf" | "allOf" => {
                if let Value::Array(list) = sub {
                    list.iter_mut().for_each(spell_out_boolean_schemas);
                }
            }
            _ => spell_out_boolean_schemas(sub),
        }
    }
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn number(schema: &Map<String, Value>, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn count(schema: &Map<String, Value>, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).map(|n| n as usize)
}

/// True when `value` satisfies `schema`. Implements exactly: type, enum, const, properties,
/// required, additionalProperties, items, anyOf, oneOf, allOf, minimum, maximum,
/// minLength, maxLength, minItems, maxItems (other keywords are ignored).
pub fn validate(schema: &Value, value: &Value) -> bool {
    let schema = match schema {
        Value::Bool(b) => return *b,
        Value::Object(m) => m,
        _ => return false,
    };
    match schema.get("type") {
        Some(Value::String(t)) if !type_matches(t, value) => return false,
        Some(Value::Array(ts)) if !ts.iter().any(|t| t.as_str().is_some_and(|t| type_matches(t, value))) => {
            return false;
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        return false;
    }
    if schema.get("const").is_some_and(|c| c != value) {
        return false;
    }
    if let Some(n) = value.as_f64()
        && (number(schema, "minimum").is_some_and(|min| n < min)
            || number(schema, "maximum").is_some_and(|max| n > max))
    {
        return false;
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count();
        if count(schema, "minLength").is_some_and(|min| len < min)
            || count(schema, "maxLength").is_some_and(|max| len > max)
        {
            return false;
        }
    }
    if let Some(items) = value.as_array() {
        if count(schema, "minItems").is_some_and(|min| items.len() < min)
            || count(schema, "maxItems").is_some_and(|max| items.len() > max)
        {
            return false;
        }
        if let Some(item_schema) = schema.get("items")
            && !items.iter().all(|i| validate(item_schema, i))
        {
            return false;
        }
    }
    if let Some(object) = value.as_object() {
        let empty = Map::new();
        let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        if let Some(Value::Array(required)) = schema.get("required")
            && !required.iter().all(|r| r.as_str().is_some_and(|r| object.contains_key(r)))
        {
            return false;
        }
        for (key, v) in object {
            let ok = match (props.get(key), schema.get("additionalProperties")) {
                (Some(s), _) => validate(s, v),
                (None, Some(extra)) => validate(extra, v),
                (None, None) => true,
            };
            if !ok {
                return false;
            }
        }
    }
    let list = |key: &str| schema.get(key).and_then(Value::as_array);
    if list("allOf").is_some_and(|all| !all.iter().all(|s| validate(s, value))) {
        return false;
    }
    if list("anyOf").is_some_and(|any| !any.iter().any(|s| validate(s, value))) {
        return false;
    }
    if list("oneOf").is_some_and(|one| one.iter().filter(|s| validate(s, value)).count() != 1) {
        return false;
    }
    true
}

/// Every keyword of `schema` (recursively) that neither annotates nor is supported.
#[cfg(test)]
pub(crate) fn unsupported_keywords(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(map) = schema else { return out };
    for (key, sub) in map {
        if !SUPPORTED.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            out.push(key.clone());
        }
        match key.as_str() {
            "properties" => {
                sub.as_object().into_iter().flat_map(|m| m.values()).for_each(|s| out.extend(unsupported_keywords(s)))
            }
            "items" | "additionalProperties" => out.extend(unsupported_keywords(sub)),
            "anyOf" | "oneOf" | "allOf" => {
                sub.as_array().into_iter().flatten().for_each(|s| out.extend(unsupported_keywords(s)))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validator_checks_types_required_and_unknown_keys() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "minLength": 2},
                "b": {"type": ["integer", "null"], "minimum": 0},
                "c": {"type": "array", "items": {"type": "object", "properties": {}, "additionalProperties": false}},
                "d": {"anyOf": [{"const": "x"}, {"type": "null"}]}
            },
            "required": ["a"],
            "additionalProperties": false
        });
        assert!(validate(&schema, &json!({"a": "ab"})));
        assert!(validate(&schema, &json!({"a": "ab", "b": null, "c": [{}], "d": "x"})));
        assert!(!validate(&schema, &json!({"a": "a"})), "minLength");
        assert!(!validate(&schema, &json!({"b": 1})), "required");
        assert!(!validate(&schema, &json!({"a": "ab", "e": 1})), "unknown key");
        assert!(!validate(&schema, &json!({"a": "ab", "b": -1})), "minimum");
        assert!(!validate(&schema, &json!({"a": "ab", "b": 1.5})), "integer");
        assert!(!validate(&schema, &json!({"a": "ab", "c": [{"x": 1}]})), "nested unknown key");
        assert!(!validate(&schema, &json!({"a": "ab", "d": "y"})), "anyOf");
    }

    #[test]
    fn integer_formats_are_dropped_at_every_level_and_other_keys_kept() {
        let mut s = json!({"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint64", "minimum": 0},
            "m": {"type": ["integer", "null"], "format": "uint32"},
            "d": {"type": "string", "format": "date-time"},
            "a": {"type": "array", "items": {"anyOf": [{"type": "integer", "format": "int64"}]}},
            "type": {"type": "string", "format": "email"}
        }});
        drop_integer_formats(&mut s);
        assert_eq!(s["properties"]["n"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(s["properties"]["m"], json!({"type": ["integer", "null"]}));
        assert_eq!(s["properties"]["d"]["format"], "date-time");
        assert_eq!(s["properties"]["a"]["items"]["anyOf"][0], json!({"type": "integer"}));
        assert_eq!(s["properties"]["type"]["format"], "email", "a property named type is not a keyword");
    }

    #[test]
    fn boolean_subschemas_are_spelled_as_objects() {
        let mut s = json!({"type": "object", "properties": {"v": true, "w": {"type": "array", "items": true}}});
        spell_out_boolean_schemas(&mut s);
        assert_eq!(s["properties"]["v"], json!({}));
        assert_eq!(s["properties"]["w"]["items"], json!({}));
    }
}
