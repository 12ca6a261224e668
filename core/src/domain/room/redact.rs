//! Credential shapes and the one recursive redaction every room projection passes.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use serde::{Serialize, Serializer};

use super::{REDACTED, is_claim_handle, is_own_identifier};

// ---------- credential shapes and redaction ----------

/// True when a value carries a credential (the one whole-text rule of
/// `crate::domain::credential`: credential-shaped words, `Bearer <value>`, `name: value`
/// for a secret name, after format characters are removed), or a claim handle anywhere. Plain words such as "token" stay admissible in names and chat text.
pub fn credential_shaped(value: &str) -> bool {
    crate::domain::credential::text_carries_credential(value) || value.split_whitespace().any(is_claim_handle)
}

/// Redacts a free-text value by the one credential rule (`crate::domain::credential`):
/// credential-shaped words, the value after `Bearer`, the value of `name: value` for a
/// secret name; claim handles always, the server's own identifiers never.
pub fn redact_text(text: &str) -> String {
    let verdict = |w: &str| {
        if is_claim_handle(w) {
            Some(true)
        } else if is_own_identifier(w) {
            Some(false)
        } else {
            None
        }
    };
    crate::domain::credential::redact_text_with(text, &verdict).into_owned()
}

/// Redacts a projection recursively, object keys included: any string value or key
/// shaped like a credential is replaced, and so is the value of a secret-named key
/// (`{"password": "…"}`); the server's own identifiers stay.
pub fn redact(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(redact_string(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(redact).collect()),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let secret = matches!(&v, Value::String(s) if crate::domain::credential::secret_value(&k, s));
                let key = if credential_shaped(&k) && !is_own_identifier(&k) { redacted_key(&out) } else { k };
                out.insert(key, if secret { Value::String(REDACTED.to_owned()) } else { redact(v) });
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
    if is_own_identifier(&s) { s } else { redact_text(&s) }
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
