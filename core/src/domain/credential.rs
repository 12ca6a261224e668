//! The one credential-shape rule, shared by the request-id check, error scrubbing, the
//! MCP preflight and room redaction. Pure; no I/O.

/// True for values that look like a credential: bearer/JWT shapes, well-known key
/// prefixes, or long unbroken base64/hex runs. Strict, for short opaque values the
/// server would echo (request ids, JSON-RPC ids, tool names): words such as `token`
/// count too.
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
    longest_run(value) >= 32
}

fn is_run_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=' || c == '_'
}

fn longest_run(value: &str) -> usize {
    value.split(|c| !is_run_char(c)).map(str::len).max().unwrap_or(0)
}

/// Key prefixes and the least length of what follows them (`[A-Za-z0-9_-]`).
const KEY_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 8),
    ("sk_", 8),
    ("rk_", 8),
    ("ghp_", 16),
    ("gho_", 16),
    ("ghs_", 16),
    ("github_pat_", 16),
    ("pat_", 16),
    ("xoxb-", 8),
    ("xoxp-", 8),
    ("xoxa-", 8),
    ("xoxr-", 8),
    ("xoxs-", 8),
    ("glpat-", 16),
];

/// The precise shape of one credential word, for values that may be prose: a JWT, a
/// dotted base64url token, a key prefix followed by a key body, an AWS access key id.
/// (`Asian` or a URL with three long dotted labels are not credentials.)
fn has_key_shape(word: &str) -> bool {
    let b64url = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_=".contains(&b));
    if word.starts_with("eyJ") && word.len() >= 16 && word.split('.').all(b64url) {
        return true;
    }
    if word.split('.').all(b64url) && word.split('.').filter(|s| s.len() >= 8).count() >= 3 {
        return true;
    }
    let prefixed = KEY_PREFIXES.iter().any(|(p, min)| {
        word.get(..p.len()).is_some_and(|head| head.eq_ignore_ascii_case(p))
            && word[p.len()..].len() >= *min
            && b64url(&word[p.len()..])
    });
    let aws = (word.starts_with("AKIA") || word.starts_with("ASIA"))
        && word.len() >= 16
        && word.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    prefixed || aws
}

/// A base64/hex run of 32 or more characters that looks random rather than written.
/// Split at `/ _ + =`, a piece of 16+ characters is random when it is hex of 24+ with
/// digits, when letters and digits alternate (4+ changes), or when its letters are
/// 25-75 % capitals (base64). A hex or base64 secret is; a URL path, a snake_case name,
/// `Lamoreaux_1997_torsion_pendulum_measurement` or a CamelCase word is not.
fn has_random_run(word: &str) -> bool {
    word.split(|c| !is_run_char(c)).filter(|run| run.len() >= 32).any(|run| {
        run.split(['/', '_', '+', '=']).filter(|piece| piece.len() >= 16).any(|piece| {
            let b = piece.as_bytes();
            let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
            let letters = b.iter().filter(|c| c.is_ascii_alphabetic()).count();
            let upper = b.iter().filter(|c| c.is_ascii_uppercase()).count();
            let changes = b.windows(2).filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit()).count();
            let hex = piece.len() >= 24 && digits >= 3 && b.iter().all(u8::is_ascii_hexdigit);
            hex || (digits >= 3 && letters >= 3 && changes >= 4)
                || (letters >= 12 && 4 * upper >= letters && 4 * upper <= 3 * letters)
        })
    })
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
/// are made of (a server-issued run id is `run_` + 32 hex digits), so they do not count.
pub fn identifier_carries_credential(value: &str) -> bool {
    scan_words(value, false)
}

fn scan_words(text: &str, long_runs: bool) -> bool {
    // Borrowed words, compared without case: no allocation per word.
    let mut words = text.split_whitespace().map(|w| w.trim_matches(|c: char| "\"'`()[]{}<>,;".contains(c))).peekable();
    while let Some(word) = words.next() {
        if has_key_shape(word) || (long_runs && has_random_run(word)) {
            return true;
        }
        let next_len = words.peek().map_or(0, |w| w.len());
        if (word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic")) && next_len >= 8 {
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
