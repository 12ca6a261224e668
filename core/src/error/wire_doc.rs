//! docs/wire.md's error code list against the error table, both ways: every code the table
//! serves is listed with its HTTP status, and every listed code is served with that status.

use std::collections::BTreeMap;

use super::ApiError;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/wire.md");

/// The `| `code` | status | when |` rows of the doc's error envelope section.
fn listed() -> BTreeMap<String, u16> {
    let doc = std::fs::read_to_string(DOC).unwrap();
    let section = doc.split("## Error envelope").nth(1).expect("wire.md has an error envelope section");
    let section = section.split("\n## ").next().unwrap();
    let mut codes = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let code = cells[1].trim_matches('`').to_owned();
        let status = cells[2].parse().unwrap_or_else(|_| panic!("{code}: the status is a number: {row}"));
        assert!(codes.insert(code.clone(), status).is_none(), "{code} is listed twice");
    }
    codes
}

/// The table's codes with their status; variants that share a code share its status and
/// retryability.
fn served() -> BTreeMap<String, u16> {
    let mut codes = BTreeMap::new();
    for row in ApiError::TABLE {
        let same = ApiError::TABLE.iter().filter(|r| r.code == row.code);
        for other in same {
            assert_eq!((other.status, other.retryable), (row.status, row.retryable), "{}", row.code);
        }
        codes.insert(row.code.to_owned(), row.status.as_u16());
    }
    codes
}

#[test]
fn the_wire_doc_lists_every_error_code_with_its_status_and_nothing_else() {
    let (listed, served) = (listed(), served());
    let unlisted: Vec<_> = served.iter().filter(|(c, _)| !listed.contains_key(*c)).collect();
    let unserved: Vec<_> = listed.iter().filter(|(c, _)| !served.contains_key(*c)).collect();
    assert!(unlisted.is_empty(), "served but not in docs/wire.md: {unlisted:?}");
    assert!(unserved.is_empty(), "in docs/wire.md but not served: {unserved:?}");
    assert_eq!(listed, served, "the HTTP statuses differ");
}

#[test]
fn each_variant_has_one_row_and_answers_from_it() {
    let mut names: Vec<_> = ApiError::TABLE.iter().map(|r| r.variant).collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "a variant has one row");
    for e in [ApiError::NotFound, ApiError::RunBusy, ApiError::SessionRequired, ApiError::ConnectorUnavailable] {
        let row = ApiError::TABLE.iter().find(|r| r.variant == format!("{e:?}")).unwrap();
        assert_eq!(e.row(), row);
        assert_eq!(
            (e.code(), e.status(), e.retryable(), e.to_string().as_str()),
            (row.code, row.status, row.retryable, row.message)
        );
    }
    let e = ApiError::RateLimited { retry_after_secs: 3 };
    assert_eq!((e.code(), e.status().as_u16(), e.retryable()), ("rate_limited", 429, true));
    let e = ApiError::InvalidArgument { field: "arguments".into(), rule: "required".into() };
    assert_eq!(e.to_string(), "invalid request: arguments: required");
}
