//! Credential shapes and the one recursive redaction every room projection passes.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use serde::{Serialize, Serializer};

use super::{REDACTED, is_claim_handle, is_own_identifier};

// ---------- credential shapes and redaction ----------

/// True when a value carries a credential (the shared rule the MCP preflight applies to
/// free text: credential-shaped words, `Bearer <value>`, `password=…`), or a claim handle
/// anywhere. Plain words such as "token" stay admissible in names and chat text.
pub fn credential_shaped(value: &str) -> bool {
    crate::domain::credential::text_carries_credential(value) || value.split_whitespace().any(is_claim_handle)
}

/// Redacts a free-text value word by word: credential-shaped words, and the word after
/// `Bearer`/`Basic`, become `[redacted]`.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut redact_next = false;
    let mut rest = text;
    while !rest.is_empty() {
        let ws = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..ws]);
        rest = &rest[ws..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = &rest[end..];
        if word.is_empty() {
            continue;
        }
        let lower = word.to_ascii_lowercase();
        let scheme = lower == "bearer" || lower == "basic";
        if redact_next || (!scheme && credential_shaped(word) && !is_own_identifier(word)) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        redact_next = scheme;
    }
    out
}

/// Redacts a projection recursively, object keys included: any string value or key
/// shaped like a credential is replaced; the server's own identifiers stay.
pub fn redact(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(redact_string(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(redact).collect()),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = if credential_shaped(&k) && !is_own_identifier(&k) { redacted_key(&out) } else { k };
                out.insert(key, redact(v));
            }
            Value::Object(out)
        }
        other => other,
    }
}

/// A view that serialises redacted: the one boundary every room output crosses, kept
/// in the type so a handler cannot send a projection unredacted.
#[derive(Debug, Clone, PartialEq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn new(view: T) -> Self {
        Self(view)
    }
    /// The view before redaction (for the service's own reads, never for output).
    pub fn get(&self) -> &T {
        &self.0
    }
}

impl<T: Serialize> Serialize for Redacted<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        redact(serde_json::to_value(&self.0).map_err(serde::ser::Error::custom)?).serialize(s)
    }
}

fn redact_string(s: String) -> String {
    if is_own_identifier(&s) {
        s
    } else if s.contains(char::is_whitespace) {
        redact_text(&s)
    } else if credential_shaped(&s) {
        REDACTED.to_owned()
    } else {
        s
    }
}

/// A unique key for a redacted object key (two redacted keys must not collide).
fn redacted_key(map: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut n = 0;
    loop {
        let k = if n == 0 { REDACTED.to_owned() } else { format!("{REDACTED}#{n}") };
        if !map.contains_key(&k) {
            return k;
        }
        n += 1;
    }
}
