//! The one rule for the schema version of a stored JSON body. A body without
//! `schema_version` is version 1; version 1 is written without the field, so a body
//! stays byte-identical to what was stored before versions existed and older code still
//! reads it; a kind whose body shape changes bumps its version, and from then on the
//! field is written. A kernel record carries the field itself (`#[serde(default =
//! "version::first", skip_serializing_if = "version::is_first")]`); a domain or wire
//! type stored as a body (a run, an event) is written through [`write`], so the
//! version stays on the stored side and never reaches the wire.
//! Must not depend on anything above the kernel.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The first version of every body kind, and the shape written before versions existed.
pub const FIRST: u32 = 1;

/// The serde default of a record's `schema_version`: a body without it is version 1.
pub fn first() -> u32 {
    FIRST
}

/// The serde skip of a record's `schema_version`: version 1 is written without it.
pub fn is_first(v: &u32) -> bool {
    *v == FIRST
}

/// A value written with its version beside its own fields (only from version 2 on).
#[derive(Serialize)]
struct Versioned<'a, T> {
    schema_version: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// The body of `value` as version `version` of its kind: at version 1 exactly the
/// value's JSON; later, the same object with `schema_version` added.
pub fn write<T: Serialize>(value: &T, version: u32) -> Result<String, ApiError> {
    if is_first(&version) {
        serde_json::to_string(value)
    } else {
        serde_json::to_string(&Versioned { schema_version: version, body: value })
    }
    .map_err(ApiError::internal)
}

#[derive(serde::Deserialize)]
struct Head {
    #[serde(default = "first")]
    schema_version: u32,
}

/// The version a stored body was written as (1 when it has no `schema_version`, or is
/// not an object, as a snapshot's message array).
pub fn of(body: &str) -> u32 {
    if !body.contains("\"schema_version\"") {
        return FIRST;
    }
    serde_json::from_str::<Head>(body).map(|h| h.schema_version).unwrap_or(FIRST)
}

/// Reads a stored body. A kind still at version 1 reads every body as that shape (a
/// record's field defaults to 1); a kind that bumps its version dispatches on [`of`].
pub fn read<T: DeserializeOwned>(body: &str) -> Result<T, ApiError> {
    serde_json::from_str(body).map_err(ApiError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Plain {
        a: u32,
        b: Option<String>,
    }

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Record {
        #[serde(default = "first", skip_serializing_if = "is_first")]
        schema_version: u32,
        a: u32,
    }

    #[test]
    fn version_one_is_written_exactly_as_the_value_without_the_field() {
        let v = Plain { a: 1, b: None };
        assert_eq!(write(&v, FIRST).unwrap(), serde_json::to_string(&v).unwrap());
        assert_eq!(serde_json::to_string(&Record { schema_version: 1, a: 1 }).unwrap(), r#"{"a":1}"#);
        assert_eq!(write(&vec![1, 2], FIRST).unwrap(), "[1,2]", "an array body is version 1 as it is");
    }

    #[test]
    fn a_later_version_is_written_beside_the_fields() {
        assert_eq!(write(&Plain { a: 1, b: None }, 2).unwrap(), r#"{"schema_version":2,"a":1,"b":null}"#);
        assert_eq!(
            serde_json::to_string(&Record { schema_version: 2, a: 1 }).unwrap(),
            r#"{"schema_version":2,"a":1}"#
        );
    }

    #[test]
    fn a_body_without_a_version_reads_as_version_one() {
        assert_eq!(of(r#"{"a":1}"#), 1);
        assert_eq!(of("[1,2]"), 1);
        assert_eq!(of(r#"{"a":1,"schema_version":1}"#), 1);
        assert_eq!(of(r#"{"a":{"schema_version":3}}"#), 1, "only the body's own field counts");
        assert_eq!(of(r#"{"schema_version":2,"a":1}"#), 2);
        let r: Record = read(r#"{"a":1}"#).unwrap();
        assert_eq!(r, Record { schema_version: 1, a: 1 });
        let r: Record = read(r#"{"schema_version":2,"a":1}"#).unwrap();
        assert_eq!(r, Record { schema_version: 2, a: 1 });
    }
}
