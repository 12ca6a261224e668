use std::collections::BTreeSet;

use super::routes::ROUTES;
use super::{document, document_text};

/// The router sources whose JSON routes (`/api/...`) the document must cover.
const ROUTERS: &[(&str, &str)] = &[
    ("agent_runs.rs", include_str!("../agent_runs.rs")),
    ("rooms.rs", include_str!("../rooms.rs")),
    ("sources.rs", include_str!("../sources.rs")),
    ("account.rs", include_str!("../account.rs")),
    ("run_console.rs", include_str!("../run_console.rs")),
];

/// The path constants the routers name, resolved.
fn constant(name: &str) -> Option<String> {
    use crate::http::{account, run_console, sources};
    Some(
        match name {
            "CLAIMS_PATH" => sources::CLAIMS_PATH,
            "ROTATIONS_PATH" => sources::ROTATIONS_PATH,
            "REVOCATIONS_PATH" => sources::REVOCATIONS_PATH,
            "CLAIM_SCRIPT_PATH" => sources::CLAIM_SCRIPT_PATH,
            "CLAIM_PAGE_PATH" => crate::service::sources::CLAIM_PAGE_PATH,
            "CALLBACK_PATH" => account::CALLBACK_PATH,
            "CONSOLE_SCRIPT_PATH" => run_console::CONSOLE_SCRIPT_PATH,
            _ => return None,
        }
        .to_owned(),
    )
}

/// `(method, path)` of every `.route(…)` line of a router source (each is one line).
fn registered(file: &str, src: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for line in src.lines().filter(|l| l.trim_start().starts_with(".route(")) {
        let rest = line.trim_start().trim_start_matches(".route(");
        let (arg, handlers) = rest.split_once(", ").unwrap_or_else(|| panic!("{file}: unreadable route line {line}"));
        let path = if let Some(lit) = arg.strip_prefix('"') {
            lit.trim_end_matches('"').to_owned()
        } else if let Some(f) = arg.strip_prefix("&format!(\"") {
            f.trim_end_matches("\")")
                .replace("{INGRESS_BASE}", crate::domain::source::INGRESS_BASE)
                .replace("{{", "{")
                .replace("}}", "}")
        } else {
            constant(arg).unwrap_or_else(|| panic!("{file}: route constant {arg} is not known to the OpenAPI test"))
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
    out
}

#[test]
fn the_route_table_covers_exactly_the_json_routes_the_routers_register() {
    let mut routers = BTreeSet::new();
    for (file, src) in ROUTERS {
        let found = registered(file, src);
        assert!(!found.is_empty(), "{file}: no routes read");
        routers.extend(found.into_iter().filter(|(_, p)| p.starts_with("/api/")));
    }
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
