//! Room identifiers and opaque references: parsed once, in exactly the shape issued.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use serde::Serialize;

use crate::domain::{hash_parts, random_hex};

// ---------- identifiers ----------

pub(super) fn opaque(prefix: &str, hex_len: usize, raw: &str) -> bool {
    raw.strip_prefix(prefix)
        .is_some_and(|h| h.len() == hex_len && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// The JSON Schema of an [`opaque`] value: the prefix, then exactly `hex_len` lowercase hex digits.
pub(crate) fn opaque_schema(prefix: &str, hex_len: usize) -> schemars::Schema {
    let pattern = format!("^{prefix}[0-9a-f]{{{hex_len}}}$");
    schemars::json_schema!({"type": "string", "pattern": pattern})
}

macro_rules! opaque_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $hex:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;
            /// Exactly the shape this service issues; anything else is not found.
            pub fn parse(raw: &str) -> Option<Self> {
                opaque($prefix, $hex, raw).then(|| Self(raw.to_owned()))
            }
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, random_hex($hex / 2)))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        /// The published schema: exactly the shape [`Self::parse`] takes.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                opaque_schema($prefix, $hex)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

opaque_id!(
    /// A room (`room_` + 20 hex).
    RoomId, "room_", 20
);
opaque_id!(
    /// An opaque run-room binding reference (`rrb_` + 24 hex).
    RunBindingRef, "rrb_", 24
);
opaque_id!(
    /// An opaque claimed run-chat binding reference (`rcb_` + 24 hex).
    ChatBindingRef, "rcb_", 24
);
opaque_id!(
    /// A browser's observer binding reference (`obs_` + 24 hex).
    ObserverRef, "obs_", 24
);

/// Hex digits of a chat claim handle.
const CLAIM_HANDLE_HEX: usize = 64;

/// The browser-issued chat claim handle: show-once, short-lived, stored only as a hash.
/// Its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct ClaimHandle(String);

impl ClaimHandle {
    pub const PREFIX: &'static str = "hcc_";

    pub fn generate() -> Self {
        Self(format!("{}{}", Self::PREFIX, random_hex(CLAIM_HANDLE_HEX / 2)))
    }
    pub fn parse(raw: &str) -> Option<Self> {
        opaque(Self::PREFIX, CLAIM_HANDLE_HEX, raw).then(|| Self(raw.to_owned()))
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// The stored form (the key of the claim item).
    pub fn hash(&self) -> String {
        hash_parts(&["room-chat-claim.v1", &self.0])
    }
}

impl std::fmt::Debug for ClaimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClaimHandle(<redacted>)")
    }
}

/// True for the shape of a claim handle (the preflight admits it only to its claim tool).
pub fn is_claim_handle(s: &str) -> bool {
    opaque(ClaimHandle::PREFIX, CLAIM_HANDLE_HEX, s)
}

/// The server's own identifiers, which redaction leaves alone: they are opaque, minted
/// here, and grant nothing.
pub fn is_own_identifier(s: &str) -> bool {
    RoomId::parse(s).is_some()
        || RunBindingRef::parse(s).is_some()
        || ChatBindingRef::parse(s).is_some()
        || ObserverRef::parse(s).is_some()
        || opaque("run_", 32, s)
        || opaque("snap_", 24, s)
        || opaque("msg_", 24, s)
        || crate::domain::page::is_cursor(s)
}
