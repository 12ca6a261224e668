//! Reference tables against the code: docs/configuration.md's variables (every variable the
//! typed config reads is in the table, and every one in the table is read), and the README's
//! function table against infra/template.yaml.

use std::cell::RefCell;
use std::collections::BTreeSet;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/config");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");

/// A configuration variable's name: an uppercase identifier of a configuration family.
fn is_var(s: &str) -> bool {
    ["HELIX_", "CASIMIR_", "TRUST_PROXY"].iter().any(|p| s.starts_with(p))
        && s.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        // `<VAR>_SECRET_ARN` is one row of the table for every secret variable.
        && !s.ends_with("_SECRET_ARN")
}

/// The string literals naming variables in the config code (tests left out).
fn named_in_code() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(DIR).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.extension().is_none_or(|e| e != "rs") || name == "tests.rs" || name == "doc_table.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
        for lit in code.split('"').skip(1).step_by(2) {
            if is_var(lit) {
                names.insert(lit.to_owned());
            }
        }
    }
    names
}

/// The variables a development config asks its environment for.
fn asked_for() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    // What `helix serve` sets, so that reading runs to the end.
    let lookup = |name: &str| {
        asked.borrow_mut().insert(name.to_owned());
        match name {
            "HELIX_AGENT_ALLOW_LOCAL_HS256" => Some("1".to_owned()),
            "HELIX_AGENT_LOCAL_JWT_SECRET" => Some("a-local-development-secret-of-40-chars-ok".to_owned()),
            _ => None,
        }
    };
    let read = super::Config::from_lookup(super::DefaultMode::Development, &lookup);
    assert!(read.is_ok(), "a development config reads to the end: {:?}", read.err());
    asked.into_inner().into_iter().filter(|n| is_var(n)).collect()
}

/// The backquoted names in the first column of the table's rows.
fn in_table() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(DOC).unwrap();
    let mut names = BTreeSet::new();
    for row in doc.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split(" | ").next().unwrap();
        for name in first.split('`').skip(1).step_by(2) {
            if is_var(name) {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

#[test]
fn the_configuration_table_names_every_variable_the_config_reads_and_no_other() {
    let code: BTreeSet<String> = named_in_code().union(&asked_for()).cloned().collect();
    let table = in_table();
    let missing: Vec<_> = code.difference(&table).collect();
    let extra: Vec<_> = table.difference(&code).collect();
    assert!(missing.is_empty(), "read by core/src/config but not in docs/configuration.md's table: {missing:?}");
    assert!(extra.is_empty(), "in docs/configuration.md's table but not read by core/src/config: {extra:?}");
}

/// The README's function table against the SAM template: every deployed function's binary
/// is a row, and every row is a deployed function.
#[test]
fn the_readmes_function_table_names_every_function_of_the_template_and_no_other() {
    let template = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml")).unwrap();
    let deployed: BTreeSet<String> =
        template.lines().filter_map(|l| l.trim().strip_prefix("Binary: ")).map(|b| b.trim().to_owned()).collect();
    assert!(!deployed.is_empty(), "the template names its binaries");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let listed: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.trim().strip_prefix("| `helix-"))
        .filter_map(|rest| rest.split('`').next())
        .map(|name| format!("helix-{name}"))
        .collect();
    assert_eq!(listed, deployed, "the README's function table and infra/template.yaml's functions differ");
}
