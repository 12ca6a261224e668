//! Source identifiers and the two secrets of a source (the delivery claim handle and the
//! source bearer), stored only as hashes. No I/O; must not depend on `store` or `service`.

use serde::Serialize;

use crate::domain::{hash_parts, random_hex};

pub(super) fn opaque(prefix: &str, hex_len: usize, raw: &str) -> bool {
    raw.strip_prefix(prefix)
        .is_some_and(|h| h.len() == hex_len && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// A room source (`src_` + 20 hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct SourceId(String);

/// The published schema: exactly the shape [`SourceId::parse`] takes.
impl schemars::JsonSchema for SourceId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SourceId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::domain::room::opaque_schema("src_", 20)
    }
}

impl SourceId {
    pub fn parse(raw: &str) -> Option<Self> {
        opaque("src_", 20, raw).then(|| Self(raw.to_owned()))
    }
    pub fn generate() -> Self {
        Self(format!("src_{}", random_hex(10)))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! secret {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $domain:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, random_hex(32)))
            }
            pub fn parse(raw: &str) -> Option<Self> {
                opaque($prefix, 64, raw).then(|| Self(raw.to_owned()))
            }
            /// The raw value: only for the one response that shows it.
            pub fn expose(&self) -> &str {
                &self.0
            }
            /// The stored form.
            pub fn hash(&self) -> String {
                hash_parts(&[$domain, &self.0])
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}(<redacted>)", stringify!($name))
            }
        }
    };
}

secret!(
    /// The opaque, short-lived credential-delivery claim handle (`hsc_` + 64 hex).
    DeliveryHandle, "hsc_", "room-source-delivery.v1"
);
secret!(
    /// The source bearer a producer presents to ingress (`hsb_` + 64 hex).
    SourceBearer, "hsb_", "room-source-bearer.v1"
);
secret!(
    /// The action-connector credential a paired connector presents on the southbound
    /// connector routes (`hac_` + 64 hex): never a source bearer, nor the reverse.
    ConnectorCredential, "hac_", "room-action-connector.v1"
);

/// Constant-time equality of two stored hashes.
pub fn hashes_equal(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

pub(super) fn token_ok(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::room::credential_shaped;
    #[test]
    fn secrets_are_hashed_redacted_and_credential_shaped() {
        let b = SourceBearer::generate();
        assert!(SourceBearer::parse(b.expose()).is_some());
        assert!(DeliveryHandle::parse(b.expose()).is_none());
        assert!(!format!("{b:?}").contains(b.expose()));
        assert_ne!(b.hash(), b.expose());
        assert!(credential_shaped(b.expose()), "redaction removes a leaked bearer");
        assert!(credential_shaped(DeliveryHandle::generate().expose()));
        assert!(!credential_shaped(SourceId::generate().as_str()));
        assert!(hashes_equal(&b.hash(), &b.hash()) && !hashes_equal(&b.hash(), &SourceBearer::generate().hash()));
    }
}
