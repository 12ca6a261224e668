//! Page cursors: the opaque `next_cursor` a bounded listing returns and the `cursor` its
//! next page is asked for with. A cursor names the list it came from, the thing that list
//! is of (a room, for its members) and the last key the page read, with a check over
//! those and the caller's scope. It grants nothing: the partition a page reads always
//! comes from the principal or the session, never from the cursor, so a cursor can only
//! move the caller through its own list. A cursor that does not decode, names another
//! list, or was issued to another caller is `invalid_request`. Pure; no I/O.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::hash_parts;

/// Every cursor starts with this (so it is never mistaken for a token).
const PREFIX: &str = "hpc1_";
/// A cursor longer than this is refused before decoding.
pub const MAX_CURSOR_LEN: usize = 512;
/// Hex digits of the check kept in a cursor.
const CHECK_LEN: usize = 32;

/// The lists that page. The name is part of every cursor, so a cursor of one list is
/// refused by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagedList {
    /// The rooms of an account (REST, MCP and the `/rooms` page).
    Rooms,
    /// The members of one room, as its owner sees them on `/rooms`.
    Members,
    /// The rooms Device Check reports on.
    DeviceCheck,
    /// The sources of one room (REST).
    Sources,
    /// The runs of one agent binding (REST, the CLI).
    Runs,
    /// The runs of a signed-in person's owner tuple (the `/runs` console).
    AccountRuns,
}

impl PagedList {
    fn name(self) -> &'static str {
        match self {
            PagedList::Rooms => "rooms",
            PagedList::Members => "members",
            PagedList::DeviceCheck => "device_check",
            PagedList::Sources => "sources",
            PagedList::Runs => "runs",
            PagedList::AccountRuns => "account_runs",
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    l: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    o: Option<String>,
    a: String,
    k: String,
}

/// A decoded, checked cursor: the list it is of and the last key read before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// What the list is of (the room of a member list), when the list has one.
    pub of: Option<String>,
    /// The last key the previous page read; the next page starts after it.
    pub after: String,
}

fn check(list: PagedList, scope: &str, of: Option<&str>, after: &str) -> String {
    let mut h = hash_parts(&["page-cursor.v1", list.name(), scope, of.unwrap_or(""), after]);
    h.truncate(CHECK_LEN);
    h
}

/// A listing's query or cursor that a rule refuses: its sentence (the caller's error is
/// `invalid_request`, `error::ApiError`'s `From`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryInvalid(pub String);

/// The one refusal of a cursor, naming no part of it.
pub fn invalid() -> QueryInvalid {
    QueryInvalid("cursor: not a cursor of this list".into())
}

/// The cursor of `list` (of `of`, for `scope`) that continues after `after`.
pub fn encode(list: PagedList, scope: &str, of: Option<&str>, after: &str) -> String {
    let wire = Wire {
        l: list.name().to_owned(),
        o: of.map(str::to_owned),
        a: after.to_owned(),
        k: check(list, scope, of, after),
    };
    let json = serde_json::to_vec(&wire).unwrap_or_default();
    format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json))
}

fn wire_of(raw: &str) -> Option<Wire> {
    if raw.len() > MAX_CURSOR_LEN {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(raw.strip_prefix(PREFIX)?).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// True when `raw` has the shape of a cursor this service issues (redaction lets it
/// through; whether it is valid for a caller is [`decode`]'s question).
pub fn is_cursor(raw: &str) -> bool {
    wire_of(raw).is_some()
}

/// The list a cursor says it is of, without checking it (to route a page's one `cursor`
/// parameter); [`decode`] still checks it for the caller.
pub fn list_of(raw: &str) -> Option<PagedList> {
    let l = wire_of(raw)?.l;
    [
        PagedList::Rooms,
        PagedList::Members,
        PagedList::DeviceCheck,
        PagedList::Sources,
        PagedList::Runs,
        PagedList::AccountRuns,
    ]
    .into_iter()
    .find(|p| p.name() == l)
}

/// The cursor of `list` issued to `scope`, with `valid_after` accepting its key;
/// anything else is `invalid_request`. `of` is checked against the cursor when given.
pub fn decode(
    raw: &str,
    list: PagedList,
    scope: &str,
    of: Option<&str>,
    valid_after: impl Fn(&str) -> bool,
) -> Result<Cursor, QueryInvalid> {
    let w = wire_of(raw).ok_or_else(invalid)?;
    let of_ok = of.is_none_or(|want| w.o.as_deref() == Some(want));
    let fresh = check(list, scope, w.o.as_deref(), &w.a);
    let same: bool = subtle::ConstantTimeEq::ct_eq(fresh.as_bytes(), w.k.as_bytes()).into();
    if w.l != list.name() || !of_ok || !same || !valid_after(&w.a) {
        return Err(invalid());
    }
    Ok(Cursor { of: w.o, after: w.a })
}

/// An optional cursor argument, decoded (None: the first page).
pub fn decode_opt(
    raw: Option<&str>,
    list: PagedList,
    scope: &str,
    of: Option<&str>,
    valid_after: impl Fn(&str) -> bool,
) -> Result<Option<Cursor>, QueryInvalid> {
    raw.map(|r| decode(r, list, scope, of, valid_after)).transpose()
}

/// What to give as a `cursor`, said when it is empty.
const CURSOR_HINT: &str = "give the next_cursor of the previous page, or no cursor for the first page";

/// A listing's query string read against the parameters it takes: each value once, by
/// position in `allowed`. A parameter without a value (`status=`, `status`) says so and
/// `hint` (what to give) says what is allowed; a repeated one is "give it once"; any
/// other name lists the ones taken. Nothing of the caller's query is quoted back.
pub fn query_values<'a>(raw: Option<&'a str>, allowed: &[(&str, &str)]) -> Result<Vec<Option<&'a str>>, QueryInvalid> {
    let mut values = vec![None; allowed.len()];
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let Some(at) = allowed.iter().position(|(n, _)| *n == name) else {
            let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
            return Err(QueryInvalid(match names.as_slice() {
                [one] => format!("the only query parameter is {one}"),
                _ => format!("the only query parameters are {}", names.join(", ")),
            }));
        };
        let (name, hint) = allowed[at];
        if value.is_empty() {
            return Err(QueryInvalid(format!("{name}: empty value; {hint}")));
        }
        if values[at].replace(value).is_some() {
            return Err(QueryInvalid(format!("{name}: give it once")));
        }
    }
    Ok(values)
}

/// The published schema of a `cursor` parameter: the shape [`encode`] issues (its check
/// cannot be described; a well-shaped cursor that fails it is `invalid_request`).
pub struct CursorParam;

impl schemars::JsonSchema for CursorParam {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Cursor".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let pattern = format!("^{PREFIX}[A-Za-z0-9_-]+$");
        schemars::json_schema!({"type": "string", "minLength": PREFIX.len() + 1, "maxLength": MAX_CURSOR_LEN,
            "pattern": pattern, "description": "The next_cursor of the previous page (opaque)."})
    }
}

/// The query of a listing that takes only a [`cursor_query`] (its published form).
#[derive(schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct PageQuery {
    cursor: Option<CursorParam>,
}

/// The `cursor` of a query string that takes no other parameter (REST listings and the
/// `/rooms` page): an empty query is the first page; an unknown, repeated or empty
/// parameter is `invalid_request`.
pub fn cursor_query(raw: Option<&str>) -> Result<Option<String>, QueryInvalid> {
    Ok(query_values(raw, &[cursor_param()])?[0].map(str::to_owned))
}

/// The `cursor` parameter of a listing's query, for [`query_values`].
pub fn cursor_param() -> (&'static str, &'static str) {
    ("cursor", CURSOR_HINT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(_: &str) -> bool {
        true
    }

    #[test]
    fn a_cursor_round_trips_only_for_its_list_scope_and_subject() {
        let c = encode(PagedList::Members, "acct_a", Some("room_x"), "acct_b");
        assert!(c.starts_with(PREFIX) && is_cursor(&c));
        assert_eq!(list_of(&c), Some(PagedList::Members));
        let got = decode(&c, PagedList::Members, "acct_a", Some("room_x"), any).unwrap();
        assert_eq!(got, Cursor { of: Some("room_x".into()), after: "acct_b".into() });
        assert!(decode(&c, PagedList::Members, "acct_a", None, any).is_ok(), "of read from the cursor");
        assert!(decode(&c, PagedList::Rooms, "acct_a", Some("room_x"), any).is_err(), "another list");
        assert!(decode(&c, PagedList::Members, "acct_z", Some("room_x"), any).is_err(), "another caller");
        assert!(decode(&c, PagedList::Members, "acct_a", Some("room_y"), any).is_err(), "another room");
        assert!(decode(&c, PagedList::Members, "acct_a", None, |_| false).is_err(), "a key of the wrong shape");
    }

    #[test]
    fn malformed_or_forged_cursors_are_invalid_requests() {
        let forged = {
            let w = Wire { l: "rooms".into(), o: None, a: "room_other".into(), k: "0".repeat(CHECK_LEN) };
            format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(serde_json::to_vec(&w).unwrap()))
        };
        let long = format!("{PREFIX}{}", "A".repeat(MAX_CURSOR_LEN));
        for raw in ["", "x", "hpc1_", "hpc1_!!!", "hpc1_e30", forged.as_str(), long.as_str()] {
            let e = decode(raw, PagedList::Rooms, "acct_a", None, any).unwrap_err();
            assert_eq!(e, invalid(), "{raw}: the one refusal, naming no part of the cursor");
        }
    }

    #[test]
    fn the_query_takes_one_cursor_and_nothing_else() {
        assert_eq!(cursor_query(None).unwrap(), None);
        assert_eq!(cursor_query(Some("")).unwrap(), None);
        assert_eq!(cursor_query(Some("cursor=hpc1_abc")).unwrap().as_deref(), Some("hpc1_abc"));
        for bad in ["cursor=", "cursor=a&cursor=b", "owner=x", "cursor=a&limit=5", "cursor"] {
            assert!(cursor_query(Some(bad)).is_err(), "{bad}");
        }
        let said = |q: &str| cursor_query(Some(q)).expect_err(q).0;
        let empty = "cursor: empty value; give the next_cursor of the previous page, or no cursor for the first page";
        assert_eq!((said("cursor="), said("cursor")), (empty.to_owned(), empty.to_owned()));
        assert_eq!(said("cursor=a&cursor=b"), "cursor: give it once");
        assert_eq!(said("owner=x"), "the only query parameter is cursor");
    }

    #[test]
    fn a_cursor_is_neither_a_credential_nor_redacted() {
        let c = encode(PagedList::Rooms, "acct_a", None, &format!("room_{}", "ab12".repeat(8)));
        assert!(!crate::domain::credential::identifier_carries_credential(&c));
        assert_eq!(crate::domain::room::redact(serde_json::json!(c.clone())), serde_json::json!(c));
    }
}
