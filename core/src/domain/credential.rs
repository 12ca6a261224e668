//! The one credential-shape rule, shared by the request-id check, error scrubbing, the
//! MCP preflight and room redaction. Pure; no I/O.

/// True for values that look like a credential: bearer/JWT shapes, well-known key
/// prefixes, or long unbroken base64/hex runs.
pub fn looks_like_credential(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if ["bearer", "basic ", "token", "secret", "password", "apikey", "api_key"].iter().any(|w| lower.contains(w)) {
        return true;
    }
    if value.starts_with("eyJ") || value.split('.').filter(|s| s.len() >= 8).count() >= 3 {
        return true;
    }
    if ["sk-", "sk_", "ghp_", "gho_", "xox", "akia", "asia", "pat_", "rk_"].iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    let mut run = 0usize;
    for c in value.chars() {
        if c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=' || c == '_' {
            run += 1;
            if run >= 32 {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}
