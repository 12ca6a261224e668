//! The one credential rule, for every lane: request ids and error scrubbing, the MCP
//! preflight, room and source text, chat snapshots, observation summaries and executor
//! output. It reads a whole text, after [`normalize`] (format characters removed, NFKC):
//! credential-shaped words (JWTs, key prefixes, random runs), `Bearer <value>`, and
//! `name: value` / `name = value` / `"name": "value"` for secret names ([`names`]).
//! [`redact_text`] replaces only what it found, keeping the name (`password: [redacted]`).
//! Pure; no I/O.

use std::borrow::Cow;
use std::ops::Range;

use unicode_normalization::UnicodeNormalization;

mod names;
#[cfg(test)]
mod tests;

pub use names::{SecretName, secret_name};

/// What replaces redacted material.
pub const REDACTED: &str = "[redacted]";

/// True for values that look like a credential: bearer/JWT shapes, well-known key
/// prefixes, or long unbroken base64/hex runs. Strict, for short opaque values the
/// server would echo (request ids, JSON-RPC ids, tool names): words such as `token`
/// count too.
pub fn looks_like_credential(value: &str) -> bool {
    let value = &*normalize(value);
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

/// The W3C Trace Context identifiers a caller may use to correlate a request: a trace id
/// (32 lowercase hex digits, not all zero) or a whole `traceparent` value
/// (`00-<trace id>-<16 hex parent id>-<2 hex flags>`). Their hex runs are what
/// [`looks_like_credential`] refuses, but these shapes are public by design (sent in the
/// clear to every hop of a trace); a longer hex run, an uppercase one or any other shape
/// stays refused.
pub fn is_trace_context_id(value: &str) -> bool {
    let hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let id = |s: &str, len: usize| hex(s, len) && s.bytes().any(|b| b != b'0');
    match value.split('-').collect::<Vec<_>>().as_slice() {
        [trace_id] => id(trace_id, 32),
        [version, trace_id, parent_id, flags] => {
            hex(version, 2) && *version != "ff" && id(trace_id, 32) && id(parent_id, 16) && hex(flags, 2)
        }
        _ => false,
    }
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

/// Free text (an objective, an instruction, a summary, an object key): true when the
/// rule finds a credential in it. Plain words such as "token" or "password" alone are
/// fine in prose; `password: hunter2` is not.
pub fn text_carries_credential(text: &str) -> bool {
    !find(&normalize(text), true, &|_| None).is_empty()
}

/// An opaque identifier with its own grammar (run ids, idempotency keys, question ids):
/// as [`text_carries_credential`], except that long random runs are what identifiers
/// are made of (a server-issued run id is `run_` + 32 hex digits), so they do not count.
pub fn identifier_carries_credential(value: &str) -> bool {
    !find(&normalize(value), false, &|_| None).is_empty()
}

/// The text with every credential the rule finds replaced by `[redacted]` (for
/// `name: value`, the value only). Unchanged (borrowed, not normalised) when it finds none.
pub fn redact_text(text: &str) -> Cow<'_, str> {
    redact_text_with(text, &|_| None)
}

/// As [`redact_text`], with a verdict on single words first: `Some(true)` redacts the
/// word, `Some(false)` keeps it (the server's own identifiers), `None` leaves it to the rule.
pub fn redact_text_with<'a>(text: &'a str, verdict: &dyn Fn(&str) -> Option<bool>) -> Cow<'a, str> {
    let normalized = normalize(text);
    let spans = find(&normalized, true, verdict);
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(normalized.len());
    let mut at = 0;
    for r in spans {
        out.push_str(&normalized[at..r.start]);
        out.push_str(REDACTED);
        at = r.end;
    }
    out.push_str(&normalized[at..]);
    Cow::Owned(out)
}

/// True when `value` under the object key `key` is a secret: the key is a secret name
/// and the value is long enough to be one (`{"password": "hunter2"}`).
pub fn secret_value(key: &str, value: &str) -> bool {
    secret_name(&normalize(key)).is_some_and(|n| n.admits(&normalize(value)))
}

/// Format characters that render as nothing (soft hyphen, zero-width space and joiners,
/// direction marks, word joiner and invisible operators, BOM).
fn is_format(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}')
}

/// The text the rule reads: NFKC-folded (full-width letters and colons, compatibility
/// spaces) with format characters removed, except that one right after `Bearer`/`Basic`
/// separates the scheme from its value. ASCII text is returned as it is.
pub fn normalize(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.nfkc() {
        if !is_format(c) {
            out.push(c);
        } else if ends_with_scheme(&out) {
            out.push(' ');
        }
    }
    Cow::Owned(out)
}

fn ends_with_scheme(s: &str) -> bool {
    ["bearer", "basic"].iter().any(|w| {
        s.len() >= w.len()
            && s.is_char_boundary(s.len() - w.len())
            && s[s.len() - w.len()..].eq_ignore_ascii_case(w)
            && !s[..s.len() - w.len()].chars().next_back().is_some_and(char::is_alphanumeric)
    })
}

/// Characters trimmed from a word before its shape is read.
const TRIM: &[char] = &['"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', ',', ';'];

/// Every credential of a normalised text, as sorted, disjoint byte ranges to redact.
fn find(text: &str, long_runs: bool, verdict: &dyn Fn(&str) -> Option<bool>) -> Vec<Range<usize>> {
    let mut spans = vec![];
    let words = words(text);
    for (i, r) in words.iter().enumerate() {
        let w = &text[r.clone()];
        let hit = verdict(w).unwrap_or_else(|| has_key_shape(w) || (long_runs && has_random_run(w)));
        if hit {
            spans.push(r.clone());
        }
        let scheme = w.eq_ignore_ascii_case("bearer") || w.eq_ignore_ascii_case("basic");
        let value = |n: &&Range<usize>| {
            let v = &text[(*n).clone()];
            // `[redacted]` is what redaction left; it is not a credential.
            n.len() >= 8 && v != &REDACTED[1..REDACTED.len() - 1] && verdict(v) != Some(false)
        };
        if let Some(next) = words.get(i + 1).filter(|n| scheme && value(n)) {
            spans.push(next.clone());
        }
    }
    names::named_values(text, &mut spans);
    spans.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for r in spans {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// The whitespace-separated words of a text, trimmed of quotes and brackets, as byte ranges.
fn words(text: &str) -> Vec<Range<usize>> {
    let mut out = vec![];
    let mut push = |r: Range<usize>| {
        let w = &text[r.clone()];
        let lead = w.len() - w.trim_start_matches(TRIM).len();
        let trimmed = w.trim_matches(TRIM);
        if !trimmed.is_empty() {
            out.push(r.start + lead..r.start + lead + trimmed.len());
        }
    };
    let mut start = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                push(s..i);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        push(s..text.len());
    }
    out
}
