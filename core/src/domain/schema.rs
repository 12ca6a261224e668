//! JSON Schemas from the Rust types, one rule for every published contract: the MCP
//! tools' input schemas, generated from the strict argument structs (inlined, so clients
//! without `$ref` support read them), and output schemas from the wire DTOs; the OpenAPI
//! document's request and response schemas come from the same functions. The MCP
//! preflight's validator of `tools/call` arguments is `mcp::validate`.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The input schema of an argument struct: draft 2020-12 keywords, subschemas inlined,
/// no `$schema`/`title`/`description` at the root (the tool describes itself), `true`
/// subschemas spelled `{}` (some hosts reject boolean schemas), and no integer `format`
/// (`uint64` is not a JSON Schema format; strict validators refuse unknown ones).
/// Then [`portable`]: the form every client's function declarations accept.
pub fn input_schema<T: JsonSchema>() -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).expect("schemars output is JSON");
    spell_out_boolean_schemas(&mut value);
    drop_integer_formats(&mut value);
    portable(&mut value);
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

/// The range of a schemars integer format (`int32`, `uint64`, …).
fn integer_bounds(format: &str) -> Option<(Value, Value)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0.into(), u8::MAX.into()),
        "uint16" => (0.into(), u16::MAX.into()),
        "uint32" => (0.into(), u32::MAX.into()),
        "uint64" | "uint" => (0.into(), u64::MAX.into()),
        _ => return None,
    })
}

fn drop_integer_formats(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let integer = match map.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer && let Some(Value::String(format)) = map.remove("format") {
        // The bounds the format stood for stay, as `minimum`/`maximum` (a value the Rust
        // type cannot hold is refused by the server, so the schema says so too).
        if let Some((min, max)) = integer_bounds(&format) {
            map.entry("minimum").or_insert(min);
            map.entry("maximum").or_insert(max);
        }
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

/// Rewrites a schema into the subset Gemini's and Copilot's function declarations accept,
/// admitting exactly the same values: `$ref`s replaced by their `$defs`/`definitions`
/// entry (and those dropped), boolean subschemas spelled `{}` / `{"not": {}}`, and a
/// `type` array split into an `anyOf` of single-type branches, so an explicit `null`
/// still validates where the server accepts it. `nullable` is not used: it is OpenAPI,
/// and JSON Schema validators (the SDKs') ignore it.
pub(crate) fn portable(schema: &mut Value) {
    let mut defs = Map::new();
    if let Value::Object(root) = schema {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(d)) = root.remove(key) {
                defs.extend(d);
            }
        }
    }
    rewrite(schema, &defs, 0);
}

/// Annotations stay on the outer schema when a `type` array becomes an `anyOf`.
const OUTER: &[&str] = &["title", "description", "default", "examples", "readOnly", "writeOnly", "deprecated"];

fn rewrite(schema: &mut Value, defs: &Map<String, Value>, depth: usize) {
    let Value::Object(map) = schema else { return };
    if let Some(Value::String(target)) = map.remove("$ref") {
        let name = target.rsplit('/').next().unwrap_or_default();
        assert!(depth < 32, "recursive schema {target} cannot be inlined");
        let Some(Value::Object(def)) = defs.get(name) else { panic!("unresolved schema reference {target}") };
        for (k, v) in def {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        return rewrite(schema, defs, depth + 1);
    }
    map.remove("$defs");
    map.remove("definitions");
    for (key, sub) in map.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" => {
                if let Value::Object(props) = sub {
                    props.values_mut().for_each(|s| subschema(s, defs, depth));
                }
            }
            // `additionalProperties: false` is the keyword that closes an object: kept.
            "additionalProperties" if sub.is_boolean() => {}
            "items" | "additionalProperties" | "not" | "contains" | "propertyNames" => subschema(sub, defs, depth),
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(list) = sub {
                    list.iter_mut().for_each(|s| subschema(s, defs, depth));
                }
            }
            _ => {}
        }
    }
    if let Some(Value::Array(types)) = map.get("type").cloned() {
        split_type_array(map, &types);
    }
}

fn subschema(s: &mut Value, defs: &Map<String, Value>, depth: usize) {
    match s {
        Value::Bool(true) => *s = Value::Object(Map::new()),
        Value::Bool(false) => *s = serde_json::json!({"not": {}}),
        _ => rewrite(s, defs, depth),
    }
}

/// `{"type": [A, B], ...}` becomes `{"anyOf": [{"type": A, ...}, {"type": B, ...}]}`; every
/// assertion goes into every branch (they are type-specific or apply to all alike), except
/// that a `null` branch is the bare `{"type": "null"}` when `null` is admitted at all.
fn split_type_array(map: &mut Map<String, Value>, types: &[Value]) {
    map.remove("type");
    let mut inner = Map::new();
    for (k, v) in std::mem::take(map) {
        if OUTER.contains(&k.as_str()) {
            map.insert(k, v)
        } else {
            inner.insert(k, v)
        };
    }
    let admits_null = inner.get("enum").and_then(Value::as_array).is_none_or(|e| e.contains(&Value::Null))
        && inner.get("const").is_none_or(Value::is_null);
    let mut branches = Vec::new();
    for t in types {
        if *t == "null" {
            if admits_null {
                branches.push(serde_json::json!({"type": "null"}));
            }
            continue;
        }
        let mut branch = Map::new();
        branch.insert("type".into(), t.clone());
        for (k, v) in &inner {
            let v = match (k.as_str(), v) {
                ("enum", Value::Array(e)) => Value::Array(e.iter().filter(|x| !x.is_null()).cloned().collect()),
                _ => v.clone(),
            };
            branch.insert(k.clone(), v);
        }
        branches.push(Value::Object(branch));
    }
    if branches.len() == 1 {
        map.extend(branches.pop().and_then(|b| b.as_object().cloned()).unwrap_or_default());
    } else {
        map.insert("anyOf".into(), Value::Array(branches));
    }
}

/// Every form some MCP client's function declarations reject, found anywhere in
/// `schema`: a `type` array, `$ref`, `$defs`, `definitions`, or a boolean schema (other
/// than `additionalProperties: false|true`, the keyword form).
#[cfg(test)]
pub(crate) fn unportable_forms(schema: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(map) = schema else {
        out.push(format!("{at}: schema is not an object: {schema}"));
        return out;
    };
    for (key, sub) in map {
        let here = format!("{at}/{key}");
        match key.as_str() {
            "type" if sub.is_array() => out.push(format!("{here}: type array {sub}")),
            "$ref" | "$defs" | "definitions" => out.push(format!("{here}: {key}")),
            "properties" | "patternProperties" => {
                for (name, s) in sub.as_object().into_iter().flatten() {
                    out.extend(unportable_forms(s, &format!("{here}/{name}")));
                }
            }
            "additionalProperties" if sub.is_boolean() => {}
            "items" | "additionalProperties" | "not" | "contains" | "propertyNames" => {
                out.extend(unportable_forms(sub, &here))
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                for (i, s) in sub.as_array().into_iter().flatten().enumerate() {
                    out.extend(unportable_forms(s, &format!("{here}/{i}")));
                }
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
    fn integer_formats_become_their_bounds_at_every_level_and_other_keys_kept() {
        let mut s = json!({"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint64", "minimum": 0},
            "m": {"type": ["integer", "null"], "format": "uint32"},
            "d": {"type": "string", "format": "date-time"},
            "a": {"type": "array", "items": {"anyOf": [{"type": "integer", "format": "int64"}]}},
            "type": {"type": "string", "format": "email"}
        }});
        drop_integer_formats(&mut s);
        assert_eq!(s["properties"]["n"], json!({"type": "integer", "minimum": 0, "maximum": u64::MAX}));
        assert_eq!(s["properties"]["m"], json!({"type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX}));
        assert_eq!(s["properties"]["d"]["format"], "date-time");
        assert_eq!(
            s["properties"]["a"]["items"]["anyOf"][0],
            json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX})
        );
        assert_eq!(s["properties"]["type"]["format"], "email", "a property named type is not a keyword");
    }

    #[test]
    fn portable_schemas_split_type_arrays_inline_refs_and_spell_booleans() {
        let mut s = json!({
            "type": "object",
            "properties": {
                "n": {"type": ["integer", "null"], "minimum": 0, "description": "d", "default": null},
                "e": {"type": ["string", "null"], "enum": ["a", "b", null]},
                "r": {"$ref": "#/$defs/Inner"},
                "i": {"type": "array", "items": false},
                "x": true
            },
            "additionalProperties": false,
            "$defs": {"Inner": {"type": "object", "properties": {"k": {"type": ["boolean", "null"]}}}}
        });
        portable(&mut s);
        let p = &s["properties"];
        assert_eq!(
            p["n"],
            json!({"description": "d", "default": null, "anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
        );
        assert_eq!(p["e"], json!({"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]}));
        assert_eq!(p["r"]["properties"]["k"], json!({"anyOf": [{"type": "boolean"}, {"type": "null"}]}));
        assert_eq!(p["i"]["items"], json!({"not": {}}));
        assert_eq!(p["x"], json!({}));
        assert_eq!(s["additionalProperties"], false);
        assert!(s.get("$defs").is_none());
        assert_eq!(unportable_forms(&s, ""), Vec::<String>::new());
        for (value, ok) in [(json!({"n": null}), true), (json!({"n": 1}), true), (json!({"n": -1}), false)] {
            assert_eq!(jsonschema::validator_for(&s).unwrap().is_valid(&value), ok, "{value}");
        }
    }

    #[test]
    fn boolean_subschemas_are_spelled_as_objects() {
        let mut s = json!({"type": "object", "properties": {"v": true, "w": {"type": "array", "items": true}}});
        spell_out_boolean_schemas(&mut s);
        assert_eq!(s["properties"]["v"], json!({}));
        assert_eq!(s["properties"]["w"]["items"], json!({}));
    }
}
