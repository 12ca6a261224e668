//! The one credential-shape rule, shared by the request-id check, error scrubbing, the
//! MCP preflight and room redaction. Pure; no I/O.

/// True for values that look like a credential: bearer/JWT shapes, well-known key
/// prefixes, or long unbroken base64/hex runs.
pub fn looks_like_credential(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if ["bearer", "basic ", "token", "secret", "password", "apikey", "api_key"].iter().any(|w| lower.contains(w)) {
        return true;
    }
    has_credential_shape(value, true)
}

/// The shape of one credential-like word: a JWT or dotted token, a well-known key
/// prefix, and with `long_runs` an unbroken base64/hex run of 32 or more characters.
fn has_credential_shape(word: &str, long_runs: bool) -> bool {
    if word.starts_with("eyJ") || word.split('.').filter(|s| s.len() >= 8).count() >= 3 {
        return true;
    }
    let lower = word.to_ascii_lowercase();
    if ["sk-", "sk_", "ghp_", "gho_", "xox", "akia", "asia", "pat_", "rk_"].iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    let mut run = 0usize;
    for c in word.chars() {
        if c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=' || c == '_' {
            run += 1;
            if long_runs && run >= 32 {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// Words that introduce a secret in `name: value` / `name=value` form.
const SECRET_NAMES: &[&str] =
    &["password", "passwd", "secret", "token", "api_key", "apikey", "access_key", "private_key", "credential"];

/// Free text (an objective, an instruction, an answer value, an object key): true when
/// a word of it has a credential's shape, when it carries an `Authorization` value
/// (`Bearer <credential>`, `Basic <credential>`), or a `password=…`-style assignment.
/// Plain words such as "token" or "password" alone are fine in prose.
pub fn text_carries_credential(text: &str) -> bool {
    scan_words(text, true)
}

/// An opaque identifier with its own grammar (run ids, idempotency keys, question ids):
/// as [`text_carries_credential`], except that long random runs are what identifiers
/// are made of (a server-issued run id is 36 such characters), so they do not count.
pub fn identifier_carries_credential(value: &str) -> bool {
    scan_words(value, false)
}

fn scan_words(text: &str, long_runs: bool) -> bool {
    let trim = |w: &str| w.trim_matches(|c: char| "\"'`()[]{}<>,;".contains(c)).to_owned();
    let words: Vec<String> = text.split_whitespace().map(trim).collect();
    for (i, word) in words.iter().enumerate() {
        if has_credential_shape(word, long_runs) {
            return true;
        }
        let lower = word.to_ascii_lowercase();
        let next_len = words.get(i + 1).map_or(0, |w| w.len());
        if (lower == "bearer" || lower == "basic") && next_len >= 8 {
            return true;
        }
    }
    let lower = text.to_ascii_lowercase();
    SECRET_NAMES.iter().any(|name| {
        lower.match_indices(name).any(|(at, _)| {
            let rest = lower[at + name.len()..].trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '"');
            let Some(value) = rest.strip_prefix([':', '=']) else { return false };
            let value = value.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '"');
            value.chars().take_while(|c| !c.is_whitespace() && *c != '"').count() >= 6
        })
    })
}
