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
    "not",
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
/// required, additionalProperties, items, anyOf, oneOf, allOf, not, minimum, maximum,
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
    if schema.get("not").is_some_and(|not| validate(not, value)) {
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
            "items" | "additionalProperties" | "not" => out.extend(unsupported_keywords(sub)),
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
            assert_eq!(validate(&s, &value), ok, "{value}");
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
