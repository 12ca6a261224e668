//! Identifiers parsed once: a value of these types is always valid.

use std::fmt;

use super::random_hex;

#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// `run_[A-Za-z0-9._:-]{8,200}` (the contract's pattern; 204 characters at most).
    pub fn parse(raw: &str) -> Option<Self> {
        let rest = raw.strip_prefix("run_")?;
        let ok_len = RUN_ID_LEN.contains(&rest.len());
        let ok_chars = rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
        (ok_len && ok_chars).then(|| Self(raw.to_owned()))
    }
    pub fn generate() -> Self {
        Self(format!("run_{}", random_hex(16)))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The characters after `run_`: how many, and which (the JSON Schema below says the same).
const RUN_ID_LEN: std::ops::RangeInclusive<usize> = 8..=200;

/// The run id's schema (a path parameter of the published contract), from the rule of
/// [`RunId::parse`].
impl schemars::JsonSchema for RunId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RunId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let pattern = format!("^run_[A-Za-z0-9._:-]{{{},{}}}$", RUN_ID_LEN.start(), RUN_ID_LEN.end());
        schemars::json_schema!({"type": "string", "pattern": pattern})
    }
}

/// An `Idempotency-Key`: 8-200 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

/// How many characters an `Idempotency-Key` has.
pub const IDEMPOTENCY_KEY_LEN: std::ops::RangeInclusive<usize> = 8..=200;

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Option<Self> {
        let ok = IDEMPOTENCY_KEY_LEN.contains(&raw.len()) && raw.bytes().all(|b| (0x21..=0x7e).contains(&b));
        ok.then(|| Self(raw.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The header's schema in the published contract, from the rule of [`IdempotencyKey::parse`]
/// (visible ASCII is `!` to `~`).
impl schemars::JsonSchema for IdempotencyKey {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IdempotencyKey".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let (min, max) = (*IDEMPOTENCY_KEY_LEN.start(), *IDEMPOTENCY_KEY_LEN.end());
        schemars::json_schema!({"type": "string", "minLength": min, "maxLength": max, "pattern": "^[!-~]+$"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_accepts_the_contract_pattern_only() {
        assert!(RunId::parse("run_opaque-id").is_some());
        assert!(RunId::parse("run_a.b:c-d_e").is_some());
        assert!(RunId::parse("run_short").is_none(), "fewer than 8 after the prefix");
        assert!(RunId::parse("job_opaque-id").is_none());
        assert!(RunId::parse("run_opaque/id").is_none());
        assert!(RunId::parse(&format!("run_{}", "a".repeat(201))).is_none());
        assert!(RunId::parse(&RunId::generate().0).is_some());
    }

    #[test]
    fn idempotency_key_is_8_to_200_visible_ascii() {
        assert!(IdempotencyKey::parse("client-job-2041-start").is_some());
        assert!(IdempotencyKey::parse("short").is_none());
        assert!(IdempotencyKey::parse("has space inside").is_none());
        assert!(IdempotencyKey::parse(&"k".repeat(201)).is_none());
        assert!(IdempotencyKey::parse(&"k".repeat(200)).is_some());
    }
}
