//! Bearer verification (being written; this placeholder carries the output type).

pub struct VerifiedToken {
    pub issuer: String,
    pub subject: String,
    pub tenant: String,
    pub scopes: Vec<String>,
    pub expires_at: i64,
}
