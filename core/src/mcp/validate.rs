//! The small JSON Schema validator the preflight applies to `tools/call` arguments, and
//! the one violation it reports when they do not match: where (a path of the schema's
//! own property names and item indexes) and which rule. It knows exactly the keywords
//! our published input schemas use; a unit test keeps it that way.
//!
//! A [`Violation`] is built from the schema and the value's JSON type only: no caller
//! string, number or unknown key is ever part of it (an unknown key is reported at its
//! parent, with the names the schema allows).

use std::fmt;

use serde_json::{Map, Value};

/// Keywords that only annotate (no assertion).
#[cfg(test)]
const ANNOTATIONS: &[&str] =
    &["title", "description", "format", "default", "examples", "readOnly", "writeOnly", "deprecated"];

/// Assertion and applicator keywords [`check`] implements.
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
    "uniqueItems",
    "pattern",
];

/// Longest schema-derived text (an enum, a const, the allowed field names) put in a rule.
const MAX_LISTED_CHARS: usize = 200;

/// One step into the arguments: a property the schema names, an array item, or an entry
/// of an open map (whose key is the caller's, so it is never repeated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Field(String),
    Item(usize),
    Entry,
}

/// The first way a value fails its schema: where (from the arguments' root) and the rule.
/// Displays as `request.budget.max_steps: must be an integer or null`; the root itself is
/// `arguments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: Vec<Step>,
    pub rule: String,
}

impl Violation {
    fn here(rule: impl Into<String>) -> Self {
        Violation { path: Vec::new(), rule: rule.into() }
    }

    fn under(mut self, step: Step) -> Self {
        self.path.insert(0, step);
        self
    }
}

impl Violation {
    /// Where, as displayed: `request.budget.max_steps`, `action.type`; the root is `arguments`.
    pub fn field(&self) -> String {
        let text = self.to_string();
        text[..text.len() - self.rule.len() - 2].to_owned()
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str("arguments")?;
        }
        for (i, step) in self.path.iter().enumerate() {
            let dot = if i == 0 { "" } else { "." };
            match step {
                Step::Field(name) => write!(f, "{dot}{name}")?,
                Step::Item(n) => write!(f, "[{n}]")?,
                Step::Entry => write!(f, "{dot}*")?,
            }
        }
        write!(f, ": {}", self.rule)
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

fn type_name(name: &str) -> &str {
    match name {
        "object" => "an object",
        "array" => "an array",
        "string" => "a string",
        "integer" => "an integer",
        "number" => "a number",
        "boolean" => "a boolean",
        other => other,
    }
}

/// `must be an integer or null`.
fn must_be<'a>(types: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = types.into_iter().map(type_name).collect();
    format!("must be {}", names.join(" or "))
}

/// Schema-derived values listed in a rule, bounded.
fn listed(values: impl IntoIterator<Item = String>) -> Option<String> {
    let text = values.into_iter().collect::<Vec<_>>().join(", ");
    (text.chars().count() <= MAX_LISTED_CHARS).then_some(text)
}

fn number<'a>(schema: &'a Map<String, Value>, key: &str) -> Option<(f64, &'a Value)> {
    schema.get(key).and_then(|v| v.as_f64().map(|n| (n, v)))
}

fn count(schema: &Map<String, Value>, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).map(|n| n as usize)
}

/// The single JSON types a schema declares (`type` as a string or an array of strings).
fn declared_types(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

/// True when `value` satisfies `schema`.
pub fn validate(schema: &Value, value: &Value) -> bool {
    check(schema, value).is_ok()
}

/// `Ok` when `value` satisfies `schema`, else its first violation. Implements exactly:
/// type, enum, const, properties, required, additionalProperties, items, anyOf, oneOf,
/// allOf, not, minimum, maximum, minLength, maxLength, pattern, minItems, maxItems,
/// uniqueItems (other keywords are ignored). For an object, unknown fields are reported first, then missing ones,
/// then the fields' values (in name order).
pub fn check(schema: &Value, value: &Value) -> Result<(), Violation> {
    let schema = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Object(m) => m,
        _ => return Err(Violation::here("is not allowed")),
    };
    if let Some(types) = declared_types(schema)
        && !types.iter().any(|t| type_matches(t, value))
    {
        return Err(Violation::here(must_be(types)));
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let rule = listed(options.iter().map(Value::to_string));
        return Err(Violation::here(
            rule.map_or("must be one of the listed values".into(), |l| format!("must be one of {l}")),
        ));
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        return Err(Violation::here(
            listed([c.to_string()]).map_or("must be the listed value".into(), |l| format!("must be {l}")),
        ));
    }
    if let Some(n) = value.as_f64() {
        if let Some((min, v)) = number(schema, "minimum")
            && n < min
        {
            return Err(Violation::here(format!("must be at least {v}")));
        }
        if let Some((max, v)) = number(schema, "maximum")
            && n > max
        {
            return Err(Violation::here(format!("must be at most {v}")));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count();
        if let Some(min) = count(schema, "minLength").filter(|min| len < *min) {
            return Err(Violation::here(format!("must be at least {min} characters")));
        }
        if let Some(max) = count(schema, "maxLength").filter(|max| len > *max) {
            return Err(Violation::here(format!("must be at most {max} characters")));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && !matches_pattern(pattern, s)
        {
            let rule = listed([pattern.to_owned()])
                .map_or("must match the published pattern".into(), |p| format!("must match the pattern {p}"));
            return Err(Violation::here(rule));
        }
    }
    if let Some(items) = value.as_array() {
        check_items(schema, items)?;
    }
    if let Some(object) = value.as_object() {
        check_object(schema, object)?;
    }
    check_applicators(schema, value)
}

/// Whether `text` matches a schema's `pattern` (ECMA-262 regular expression, unanchored),
/// by the JSON Schema library's own regex engine; each pattern is compiled once.
fn matches_pattern(pattern: &str, text: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, Mutex};
    static COMPILED: LazyLock<Mutex<HashMap<String, Option<Arc<jsonschema::Validator>>>>> =
        LazyLock::new(Default::default);
    let validator = {
        let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
        compiled
            .entry(pattern.to_owned())
            .or_insert_with(|| jsonschema::validator_for(&serde_json::json!({"pattern": pattern})).ok().map(Arc::new))
            .clone()
    };
    // A pattern that does not compile admits nothing (fail closed).
    validator.is_some_and(|v| v.is_valid(&Value::from(text)))
}

fn check_items(schema: &Map<String, Value>, items: &[Value]) -> Result<(), Violation> {
    if let Some(min) = count(schema, "minItems").filter(|min| items.len() < *min) {
        return Err(Violation::here(format!("must have at least {min} items")));
    }
    if let Some(max) = count(schema, "maxItems").filter(|max| items.len() > *max) {
        return Err(Violation::here(format!("must have at most {max} items")));
    }
    if schema.get("uniqueItems") == Some(&Value::Bool(true))
        && items.iter().enumerate().any(|(i, a)| items[..i].contains(a))
    {
        return Err(Violation::here("must have distinct items"));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item).map_err(|v| v.under(Step::Item(i)))?;
        }
    }
    Ok(())
}

fn check_object(schema: &Map<String, Value>, object: &Map<String, Value>) -> Result<(), Violation> {
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let extra = schema.get("additionalProperties");
    if extra == Some(&Value::Bool(false)) && object.keys().any(|k| !props.contains_key(k)) {
        // The caller's key is not repeated (it may be anything, a credential included):
        // the parent is named, with the fields the schema admits there.
        let rule = match listed(props.keys().cloned()) {
            _ if props.is_empty() => "unknown field (no fields are allowed here)".to_owned(),
            Some(names) => format!("unknown field (allowed: {names})"),
            None => "unknown field".to_owned(),
        };
        return Err(Violation::here(rule));
    }
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !object.contains_key(name) {
            return Err(Violation::here("missing").under(Step::Field(name.to_owned())));
        }
    }
    for (name, sub) in props {
        if let Some(v) = object.get(name) {
            check(sub, v).map_err(|e| e.under(Step::Field(name.clone())))?;
        }
    }
    if let Some(extra) = extra {
        for (_, v) in object.iter().filter(|(k, _)| !props.contains_key(*k)) {
            check(extra, v).map_err(|e| e.under(Step::Entry))?;
        }
    }
    Ok(())
}

fn check_applicators(schema: &Map<String, Value>, value: &Value) -> Result<(), Violation> {
    let list = |key: &str| schema.get(key).and_then(Value::as_array);
    for sub in list("allOf").into_iter().flatten() {
        check(sub, value)?;
    }
    if let Some(any) = list("anyOf") {
        let results: Vec<_> = any.iter().map(|s| check(s, value)).collect();
        if !results.iter().any(Result::is_ok) {
            return Err(no_branch(any, results, value));
        }
    }
    if let Some(one) = list("oneOf") {
        let results: Vec<_> = one.iter().map(|s| check(s, value)).collect();
        match results.iter().filter(|r| r.is_ok()).count() {
            0 => return Err(no_branch(one, results, value)),
            1 => {}
            _ => return Err(Violation::here("matches more than one allowed form")),
        }
    }
    if schema.get("not").is_some_and(|not| validate(not, value)) {
        return Err(Violation::here("is not allowed"));
    }
    Ok(())
}

/// The violation of an `anyOf`/`oneOf` no branch admits: the one branch whose type admits
/// the value (a nullable integer given `-1`: `must be at least 0`), else the union of the
/// branches' types (given `"x"`: `must be an integer or null`).
fn no_branch(branches: &[Value], results: Vec<Result<(), Violation>>, value: &Value) -> Violation {
    if let Some(v) = tagged_violation(branches, &results, value) {
        return v;
    }
    let admits_type = |b: &Value| {
        b.as_object().and_then(declared_types).is_none_or(|types| types.iter().any(|t| type_matches(t, value)))
    };
    let mut candidates: Vec<Violation> =
        branches.iter().zip(results).filter(|(b, _)| admits_type(b)).filter_map(|(_, r)| r.err()).collect();
    if candidates.len() == 1 {
        return candidates.remove(0);
    }
    if candidates.is_empty() {
        let types: Option<Vec<Vec<&str>>> = branches.iter().map(|b| b.as_object().and_then(declared_types)).collect();
        if let Some(types) = types {
            return Violation::here(must_be(types.into_iter().flatten()));
        }
    }
    if let Some(first) = candidates.first()
        && candidates.iter().all(|c| c == first)
    {
        return first.clone();
    }
    Violation::here("matches none of the allowed forms")
}

/// The violation of a tagged union (every branch an object whose required property `tag`
/// is a `const`, like a player action's `type`): a missing tag, a tag no branch has
/// (`action.type: must be one of "move_to", ...`), or the tagged branch's own violation.
fn tagged_violation(branches: &[Value], results: &[Result<(), Violation>], value: &Value) -> Option<Violation> {
    let object = value.as_object()?;
    let first = branches.first()?.get("properties")?.as_object()?;
    let tag = first.keys().find(|name| branches.iter().all(|b| tag_of(b, name).is_some()))?;
    let Some(given) = object.get(tag) else {
        return Some(Violation::here("missing").under(Step::Field(tag.clone())));
    };
    match branches.iter().position(|b| tag_of(b, tag) == Some(given)) {
        Some(i) => results[i].clone().err(),
        None => {
            let tags = listed(branches.iter().filter_map(|b| tag_of(b, tag)).map(Value::to_string));
            let rule = tags.map_or("must be one of the listed values".into(), |l| format!("must be one of {l}"));
            Some(Violation::here(rule).under(Step::Field(tag.clone())))
        }
    }
}

/// A branch's `const` for its required property `name`.
fn tag_of<'a>(branch: &'a Value, name: &str) -> Option<&'a Value> {
    let b = branch.as_object()?;
    b.get("required")?.as_array()?.iter().any(|r| r == name).then_some(())?;
    b.get("properties")?.get(name)?.get("const")
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

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "minLength": 2},
                "b": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
                "c": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"], "additionalProperties": false}},
                "d": {"anyOf": [{"const": "x"}, {"type": "null"}]},
                "e": {"type": "string", "enum": ["on", "off"]},
                "f": {"type": "object", "properties": {}, "additionalProperties": false},
                "m": {"type": "object", "additionalProperties": {"type": "integer"}}
            },
            "required": ["a"],
            "additionalProperties": false
        })
    }

    fn violation(value: Value) -> String {
        check(&schema(), &value).expect_err("a violation").to_string()
    }

    #[test]
    fn validator_checks_types_required_and_unknown_keys() {
        let schema = schema();
        assert!(validate(&schema, &json!({"a": "ab"})));
        assert!(validate(&schema, &json!({"a": "ab", "b": null, "c": [{"k": true}], "d": "x", "m": {"z": 1}})));
        assert!(!validate(&schema, &json!({"a": "a"})), "minLength");
        assert!(!validate(&schema, &json!({"b": 1})), "required");
        assert!(!validate(&schema, &json!({"a": "ab", "z": 1})), "unknown key");
        assert!(!validate(&schema, &json!({"a": "ab", "b": -1})), "minimum");
        assert!(!validate(&schema, &json!({"a": "ab", "b": 1.5})), "integer");
        assert!(!validate(&schema, &json!({"a": "ab", "c": [{"k": true, "x": 1}]})), "nested unknown key");
        assert!(!validate(&schema, &json!({"a": "ab", "d": "y"})), "anyOf");
    }

    #[test]
    fn a_violation_names_the_path_and_the_rule() {
        let cases = [
            (json!({}), "a: missing"),
            (json!({"a": 7}), "a: must be a string"),
            (json!({"a": "x"}), "a: must be at least 2 characters"),
            (json!({"a": "ab", "b": "seven"}), "b: must be an integer or null"),
            (json!({"a": "ab", "b": 2.5}), "b: must be an integer or null"),
            (json!({"a": "ab", "b": -1}), "b: must be at least 0"),
            (json!({"a": "ab", "c": {}}), "c: must be an array"),
            (json!({"a": "ab", "c": [{"k": true}, {}]}), "c[1].k: missing"),
            (json!({"a": "ab", "c": [{"k": "yes"}]}), "c[0].k: must be a boolean"),
            (json!({"a": "ab", "c": [{"k": true, "kk": 1}]}), "c[0]: unknown field (allowed: k)"),
            (json!({"a": "ab", "d": "y"}), "d: must be \"x\""),
            (json!({"a": "ab", "e": "maybe"}), "e: must be one of \"on\", \"off\""),
            (json!({"a": "ab", "f": {"g": 1}}), "f: unknown field (no fields are allowed here)"),
            (json!({"a": "ab", "m": {"z": "one"}}), "m.*: must be an integer"),
            (json!({"a": "ab", "zzz": 1}), "arguments: unknown field (allowed: a, b, c, d, e, f, m)"),
        ];
        for (value, want) in cases {
            assert_eq!(violation(value.clone()), want, "{value}");
        }
        assert_eq!(check(&schema(), &json!([1])).unwrap_err().to_string(), "arguments: must be an object");
    }

    #[test]
    fn a_tagged_union_names_its_tag_or_the_tagged_branchs_rule() {
        let point = |tag: &str| {
            json!({"type": "object", "additionalProperties": false, "required": ["type", "x"],
            "properties": {"type": {"type": "string", "const": tag}, "x": {"type": "integer", "maximum": 3}}})
        };
        let schema = json!({"type": "object", "required": ["action"], "additionalProperties": false,
            "properties": {"action": {"oneOf": [point("move_to"), point("look_at"), {"type": "object",
                "additionalProperties": false, "required": ["type"], "properties": {"type": {"const": "stop"}}}]}}});
        for (action, want) in [
            (json!({"type": "teleport", "x": 1}), r#"action.type: must be one of "move_to", "look_at", "stop""#),
            (json!({"x": 1}), "action.type: missing"),
            (json!({"type": "look_at", "x": 9}), "action.x: must be at most 3"),
            (json!({"type": "stop", "x": 1}), "action: unknown field (allowed: type)"),
        ] {
            let v = check(&schema, &json!({"action": action})).expect_err("a violation");
            assert_eq!(v.to_string(), want);
            assert_eq!(format!("{}: {}", v.field(), v.rule), want);
        }
        assert!(validate(&schema, &json!({"action": {"type": "move_to", "x": 2}})));
    }

    #[test]
    fn unknown_fields_come_before_missing_ones_and_values() {
        assert_eq!(violation(json!({"aa": "x"})), "arguments: unknown field (allowed: a, b, c, d, e, f, m)");
        assert_eq!(violation(json!({"b": "x"})), "a: missing");
    }

    /// Nothing the caller sent is repeated: not a string, a number, or an unknown key.
    #[test]
    fn a_violation_never_repeats_a_caller_value() {
        let secret = "sk-live-0123456789abcdefghij";
        for value in [
            json!({"a": secret, "b": secret}),
            json!({"a": "ab", secret: 1}),
            json!({"a": "ab", "c": [{secret: true, "k": true}]}),
            json!({"a": "ab", "m": {secret: "x"}}),
            json!({"a": "ab", "e": secret}),
            json!({"a": "ab", "b": 987654321.5}),
        ] {
            let text = check(&schema(), &value).expect_err("a violation").to_string();
            for echoed in [secret, "987654321"] {
                assert!(!text.contains(echoed), "{text} repeats {echoed}");
            }
        }
    }

    #[test]
    fn patterns_and_distinct_items_are_checked_without_echoing_the_value() {
        let id = json!({"type": "string", "pattern": "^room_[0-9a-f]{20}$"});
        assert!(validate(&id, &json!("room_0123456789abcdef0123")));
        let e = check(&id, &json!("room_SECRET")).unwrap_err().to_string();
        assert_eq!(e, "arguments: must match the pattern ^room_[0-9a-f]{20}$");
        let distinct = json!({"type": "array", "uniqueItems": true});
        assert!(validate(&distinct, &json!(["a", "b"])));
        assert_eq!(check(&distinct, &json!(["a", "a"])).unwrap_err().rule, "must have distinct items");
        assert!(!validate(&json!({"pattern": "("}), &json!("x")), "a broken pattern admits nothing");
    }
}
