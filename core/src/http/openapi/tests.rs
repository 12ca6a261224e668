use std::collections::BTreeSet;

use super::routes::ROUTES;
use super::{document, document_text};

/// Every Rust source under `core/src` (read at test time, so a new router file is covered
/// without naming it here), as `(path, text)`.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

/// The `&str` path constants a source defines (`const NAME: &str = "/…";`).
fn constants(src: &str) -> Vec<(String, String)> {
    src.lines()
        .filter_map(|l| {
            let rest = l.trim_start().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
            let (name, value) = rest.strip_prefix("const ")?.split_once(": &str = \"")?;
            Some((name.to_owned(), value.strip_suffix("\";")?.to_owned()))
        })
        .collect()
}

/// The argument text of every `.route(…)` call of a source (balanced parentheses, so a
/// call spread over several lines is read whole).
fn route_calls(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in src.match_indices(".route(") {
        let body = &src[at + ".route(".len()..];
        let mut depth = 1usize;
        let end = body
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("an unbalanced .route( call: {}", &body[..body.len().min(80)]));
        out.push(body[..end].split_whitespace().collect::<Vec<_>>().join(" "));
    }
    out
}

/// `(method, path)` of every route the sources register. A path is a literal, a path
/// constant, or `&format!("{CONST}/…")`; constants resolve in their own file first, then
/// in any file that defines the name once.
fn registered() -> BTreeSet<(String, String)> {
    let files = sources();
    let mut global: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (_, src) in &files {
        for (name, value) in constants(src) {
            global.entry(name).or_default().push(value);
        }
    }
    let mut out = BTreeSet::new();
    for (file, src) in files.iter().filter(|(f, _)| !f.ends_with("openapi/tests.rs")) {
        let local = constants(src);
        let resolve = |name: &str| -> Option<String> {
            let name = name.rsplit("::").next().unwrap_or(name);
            if let Some((_, v)) = local.iter().find(|(n, _)| n == name) {
                return Some(v.clone());
            }
            match global.get(name).map(Vec::as_slice) {
                Some([one]) => Some(one.clone()),
                _ => None,
            }
        };
        for call in route_calls(src) {
            let (arg, handlers) = call.split_once(", ").unwrap_or_else(|| panic!("{file}: unreadable route {call}"));
            let path = if let Some(lit) = arg.strip_prefix('"') {
                lit.trim_end_matches('"').to_owned()
            } else if let Some(f) = arg.strip_prefix("&format!(\"") {
                let template = f.trim_end_matches("\")").replace("{{", "\u{0}").replace("}}", "\u{1}");
                let mut path = String::new();
                let mut rest = template.as_str();
                while let Some((before, after)) = rest.split_once('{') {
                    let (name, tail) = after.split_once('}').unwrap_or_else(|| panic!("{file}: {call}"));
                    path.push_str(before);
                    match resolve(name) {
                        Some(v) => path.push_str(&v),
                        // A runtime prefix (a variable): not a published route.
                        None => {
                            path.clear();
                            break;
                        }
                    }
                    rest = tail;
                }
                if path.is_empty() {
                    continue;
                }
                path.push_str(rest);
                path.replace('\u{0}', "{").replace('\u{1}', "}")
            } else {
                match resolve(arg) {
                    Some(v) => v,
                    // A variable (e.g. a metadata path chosen at runtime): not a published route.
                    None => continue,
                }
            };
            let handlers = handlers.split(".fallback").next().unwrap_or_default();
            for method in ["get", "post", "put", "patch", "delete"] {
                let hit = handlers.match_indices(&format!("{method}(")).any(|(i, _)| {
                    i == 0 || !handlers.as_bytes()[i - 1].is_ascii_alphanumeric() && handlers.as_bytes()[i - 1] != b'_'
                });
                if hit {
                    out.insert((method.to_owned(), path.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn the_route_table_covers_exactly_the_json_routes_the_routers_register() {
    let all = registered();
    for known in [("get", "/api/v1/agent-runs"), ("post", "/api/connectors/v1/poll"), ("get", "/runs")] {
        assert!(all.contains(&(known.0.to_owned(), known.1.to_owned())), "the reader missed {known:?}");
    }
    let routers: BTreeSet<_> = all.into_iter().filter(|(_, p)| p.starts_with("/api/")).collect();
    let table: BTreeSet<_> = ROUTES.iter().map(|r| (r.method.to_owned(), r.path.to_owned())).collect();
    assert_eq!(ROUTES.len(), table.len(), "a route appears twice in the table");
    let missing: Vec<_> = routers.difference(&table).collect();
    let extra: Vec<_> = table.difference(&routers).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not documented: {missing:?}; documented but not routed: {extra:?}"
    );
}

#[test]
fn every_operation_has_an_id_security_and_the_error_schema() {
    let doc = document();
    let mut ids = BTreeSet::new();
    for r in ROUTES {
        let op = &doc["paths"][r.path][r.method];
        assert!(ids.insert(op["operationId"].as_str().unwrap().to_owned()), "duplicate id {}", r.operation_id);
        assert!(op["security"].as_array().is_some_and(|s| !s.is_empty()));
        assert_eq!(op["responses"]["default"]["$ref"], "#/components/responses/Error");
        assert_eq!(
            op["responses"]["404"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorEnvelope"
        );
    }
    let error = &doc["components"]["schemas"]["ErrorEnvelope"];
    assert!(error.to_string().contains("helix.agent_api.error.v1"), "{error}");
    assert!(!doc.to_string().contains("\"$defs\""), "schemas are inlined");
}

/// Every operation with a body shows a request example, and every example (requests and
/// the error) validates against the schema the document publishes for it.
#[test]
fn every_example_validates_against_its_own_schema() {
    let doc = document();
    let schema_of = |media: &serde_json::Value| {
        let name = media["schema"]["$ref"].as_str().unwrap().rsplit('/').next().unwrap().to_owned();
        doc["components"]["schemas"][&name].clone()
    };
    let (mut checked, mut wrong) = (0, Vec::new());
    for r in ROUTES {
        let op = &doc["paths"][r.path][r.method];
        let mut media = vec![("404", &op["responses"]["404"]["content"]["application/json"])];
        if r.request.is_some() {
            let body = &op["requestBody"]["content"]["application/json"];
            assert!(body.get("example").is_some(), "{}: no request example", r.operation_id);
            media.push(("request", body));
        }
        for (what, m) in media {
            let validator = jsonschema::validator_for(&schema_of(m)).unwrap();
            let errors: Vec<String> = validator.iter_errors(&m["example"]).map(|e| e.to_string()).collect();
            if !errors.is_empty() {
                wrong.push(format!("{} {what} example: {errors:?}", r.operation_id));
            }
            checked += 1;
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(checked > ROUTES.len(), "{checked} examples checked");
    // A wrong example is caught: the schema is strict.
    let extra = serde_json::json!({"room_id": "room_1", "world_id": "overworld", "extra": 1});
    let pairing = &doc["components"]["schemas"]["PairingRequest"];
    assert!(!jsonschema::validator_for(pairing).unwrap().is_valid(&extra));
}

/// `docs/openapi.json` is the served document; `HELIX_UPDATE_OPENAPI=1` rewrites it.
#[test]
fn the_committed_copy_in_docs_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    let want = document_text();
    if std::env::var_os("HELIX_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/openapi.json is stale: run HELIX_UPDATE_OPENAPI=1 cargo test -p helix-core --lib openapi"
    );
}

/// Every link goes from an operation of the table to one whose path takes each linked
/// parameter, and reads a field its source's success schema has.
#[test]
fn every_link_names_real_operations_parameters_and_fields() {
    let doc = document();
    let op = |id: &str| ROUTES.iter().find(|r| r.operation_id == id).unwrap_or_else(|| panic!("no operation {id}"));
    for (from, targets, params) in super::links::all() {
        let source = op(from);
        for (status, schema) in source.ok {
            let (name, _) = schema();
            let props = &doc["components"]["schemas"][&name]["properties"];
            for (_, field) in params.iter() {
                assert!(props.get(field).is_some(), "{from} {status}: {name} has no {field}");
            }
            assert!(doc["paths"][source.path][source.method]["responses"][status.to_string()]["links"].is_object());
        }
        for to in targets.iter() {
            let target = op(to);
            for (param, _) in params.iter() {
                assert!(target.path.contains(&format!("{{{param}}}")), "{to} takes no {param}");
            }
        }
    }
}
