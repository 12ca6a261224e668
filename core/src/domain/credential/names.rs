//! Secret names and the `name: value` forms of the credential rule: `password: X`,
//! `my password = X`, `"client_secret": "X"`, `api token: X`, `Authorization: Bearer X`,
//! `Cookie: a=b; c=d`. A name is read without case, in words split at spaces,
//! underscores, hyphens, dots and camelCase (`clientSecret`, `API_KEY`, `x-api-key`).

use std::ops::Range;

use super::REDACTED;

/// How a secret name's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretName {
    /// A name that only ever introduces a secret (`password`, `client secret`, `api key`):
    /// a value of 3 or more characters is one.
    Strong,
    /// A name that is also a plain word (`token`, `credential`, `auth`): 8 or more.
    Weak,
    /// `Authorization`: its value, and the word after a scheme (`Bearer X`).
    Authorization,
    /// `Cookie` / `Set-Cookie`: the rest of the line.
    Cookie,
}

impl SecretName {
    fn min_chars(self) -> usize {
        match self {
            Self::Strong | Self::Authorization => 3,
            Self::Weak | Self::Cookie => 8,
        }
    }

    /// True when `value` (unquoted) is long enough to be a secret under this name.
    pub fn admits(self, value: &str) -> bool {
        !value.starts_with(&REDACTED[..REDACTED.len() - 1]) && value.trim().chars().count() >= self.min_chars()
    }
}

/// Names, compacted (lower case, no separators).
const STRONG: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "clientsecret",
    "apikey",
    "apitoken",
    "apisecret",
    "accesstoken",
    "refreshtoken",
    "authtoken",
    "idtoken",
    "sessiontoken",
    "sessionkey",
    "bearer",
    "bearertoken",
    "privatekey",
    "secretkey",
    "accesskey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "connectionstring",
];
const WEAK: &[&str] = &["token", "credential", "credentials", "auth", "sessionid", "sid", "pat"];
const AUTHORIZATION: &[&str] = &["authorization", "proxyauthorization"];
const COOKIE: &[&str] = &["cookie", "setcookie"];

/// The schemes of an `Authorization` value.
const SCHEMES: &[&str] = &["bearer", "basic", "digest", "token", "negotiate"];

/// The kind of secret a name introduces, if any: the compacted last 1-4 words of the
/// name are looked up (`my password`, `api token`, `AWS_SECRET_ACCESS_KEY`), or its last
/// word ends with a listed name of 5+ letters (`dbPassword`, `githubtoken`).
pub fn secret_name(name: &str) -> Option<SecretName> {
    let words = split_words(name);
    let n = words.len();
    let lookup = |compact: &str| {
        if STRONG.contains(&compact) {
            Some(SecretName::Strong)
        } else if AUTHORIZATION.contains(&compact) {
            Some(SecretName::Authorization)
        } else if COOKIE.contains(&compact) {
            Some(SecretName::Cookie)
        } else if WEAK.contains(&compact) {
            Some(SecretName::Weak)
        } else {
            None
        }
    };
    let mut found = None;
    for k in 1..=n.min(4) {
        if let Some(kind) = lookup(&words[n - k..].concat()) {
            // The strongest reading wins: `api token` is strong though `token` is weak.
            if found.is_none() || found == Some(SecretName::Weak) {
                found = Some(kind);
            }
        }
    }
    if found.is_none() {
        let last = words.last()?;
        let ends = |list: &[&str]| list.iter().any(|s| s.len() >= 5 && last.ends_with(s));
        found = if ends(STRONG) {
            Some(SecretName::Strong)
        } else if ends(WEAK) {
            Some(SecretName::Weak)
        } else {
            None
        };
    }
    found
}

/// Lower-case words of a name: split at non-alphanumerics and lower-to-upper changes.
fn split_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = vec![];
    let mut prev_lower = false;
    let mut current = String::new();
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// At most this many bytes of a name are read before its separator.
const MAX_NAME_BYTES: usize = 48;
/// At most this many bytes of a quoted value are redacted.
const MAX_QUOTED_BYTES: usize = 4096;

/// Adds the value range of every `name: value` / `name = value` whose name is a secret.
pub(super) fn named_values(text: &str, spans: &mut Vec<Range<usize>>) {
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c != b':' && c != b'=' {
            continue;
        }
        // The second character of `:=`, `==` or `=>` is not a separator. A `://` is no
        // exception: a URL's scheme is never a secret name, and a secret name before `://`
        // (`password://…`) is a value to redact, not a URL to keep (fail closed).
        if i > 0 && matches!(b[i - 1], b':' | b'=') {
            continue;
        }
        let Some(kind) = name_before(&text[..i]) else { continue };
        let after = if matches!(b.get(i + 1), Some(b'=' | b'>')) { i + 2 } else { i + 1 };
        if let Some(value) = value_after(text, after, kind) {
            spans.push(value);
        }
    }
}

/// The secret name that ends `head` (before a separator), past spaces and a closing quote.
fn name_before(head: &str) -> Option<SecretName> {
    let head = head.trim_end_matches([' ', '\t']);
    let head = match head.strip_suffix(['"', '\'', '`']) {
        Some(h) => h.strip_suffix('\\').unwrap_or(h),
        None => head,
    };
    let name_char = |c: char| c.is_alphanumeric() || matches!(c, ' ' | '_' | '-' | '.');
    let mut start = head.len();
    for (at, c) in head.char_indices().rev() {
        if !name_char(c) || head.len() - at > MAX_NAME_BYTES {
            break;
        }
        start = at;
    }
    let name = head[start..].trim();
    if name.is_empty() { None } else { secret_name(name) }
}

/// The byte range of the value that starts at `from` (past spaces; quoted or not).
fn value_after(text: &str, from: usize, kind: SecretName) -> Option<Range<usize>> {
    let rest = &text[from..];
    let start = from + (rest.len() - rest.trim_start_matches([' ', '\t']).len());
    let rest = &text[start..];
    let escaped = rest.starts_with("\\\"");
    let quote = if escaped { Some('"') } else { rest.chars().next().filter(|c| matches!(c, '"' | '\'' | '`')) };
    let range = if let Some(q) = quote {
        let open = if escaped { 2 } else { 1 };
        let inner = &rest[open..];
        let mut end = inner.find(|c: char| c == q || c == '\n' || (escaped && c == '\\')).unwrap_or(inner.len());
        if end > MAX_QUOTED_BYTES {
            end = MAX_QUOTED_BYTES;
            while !inner.is_char_boundary(end) {
                end -= 1;
            }
        }
        start + open..start + open + end
    } else {
        let stop: &[char] = match kind {
            SecretName::Cookie => &['\n', '"'],
            _ => &[',', ';', '&', ')', ']', '}', '"', '\'', '<', '>'],
        };
        let word_end = rest.find(|c: char| stop.contains(&c) || (kind != SecretName::Cookie && c.is_whitespace()));
        let mut end = word_end.unwrap_or(rest.len());
        if kind == SecretName::Authorization && SCHEMES.iter().any(|s| rest[..end].eq_ignore_ascii_case(s)) {
            // `Authorization: Bearer X`: the scheme and its value.
            let tail = &rest[end..];
            let gap = tail.len() - tail.trim_start_matches([' ', '\t']).len();
            let next = tail[gap..].find(|c: char| c.is_whitespace() || stop.contains(&c)).unwrap_or(tail.len() - gap);
            end += gap + next;
        }
        start..start + end
    };
    kind.admits(&text[range.clone()]).then_some(range)
}
