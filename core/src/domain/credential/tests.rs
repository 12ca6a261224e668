use proptest::prelude::*;

use super::*;

/// Redacts and checks the secret is gone and the text is still detected before, clean after.
fn redacts(text: &str, secret: &str) -> String {
    assert!(text_carries_credential(text), "detected: {text:?}");
    let out = redact_text(text).into_owned();
    assert!(!out.contains(secret), "{secret:?} survives in {out:?}");
    assert!(!text_carries_credential(&out), "redaction is complete: {out:?}");
    assert_eq!(redact_text(&out), out, "redaction is idempotent");
    out
}

#[test]
fn name_value_forms_are_found_and_only_their_values_redacted() {
    assert_eq!(redacts("my password: hunter2", "hunter2"), "my password: [redacted]");
    assert_eq!(redacts(r#"{"password": "hunter 2"}"#, "hunter 2"), r#"{"password": "[redacted]"}"#);
    assert_eq!(redacts(r#"{\"password\":\"hunter2\"}"#, "hunter2"), r#"{\"password\":\"[redacted]\"}"#);
    assert_eq!(redacts("api token: abc123xyz", "abc123xyz"), "api token: [redacted]");
    assert_eq!(redacts("client_secret = s3cr3tvalue", "s3cr3tvalue"), "client_secret = [redacted]");
    assert_eq!(redacts("clientSecret=s3cr3tvalue&x=1", "s3cr3tvalue"), "clientSecret=[redacted]&x=1");
    assert_eq!(redacts("Authorization: Bearer abc.def", "abc.def"), "Authorization: [redacted]");
    // A secret name before `://` is no URL scheme: its value goes (a proptest found `password://00`).
    assert_eq!(redacts("password://hunter2x", "//hunter2x"), "password:[redacted]");
    assert_eq!(redacts("cookie: sid=abc123; theme=dark", "abc123"), "cookie: [redacted]");
    assert_eq!(redacts("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "wJalrXUtnFEMI"), "AWS_SECRET_ACCESS_KEY=[redacted]");
    assert_eq!(redacts("x-api-key: 12345", "12345"), "x-api-key: [redacted]");
    assert_eq!(redacts("dbPassword := letmein", "letmein"), "dbPassword := [redacted]");
    assert_eq!(redacts("private-key: 'abc def'", "abc def"), "private-key: '[redacted]'");
    assert_eq!(redacts("access token:abcdefgh, then", "abcdefgh"), "access token:[redacted], then");
    assert_eq!(
        redacts("the passphrase is set; passphrase=correct horse", "correct"),
        "the passphrase is set; passphrase=[redacted] horse"
    );
}

#[test]
fn format_characters_and_compatibility_forms_do_not_hide_a_credential() {
    let out = redacts("Bearer\u{200b}abcdefgh12345678", "abcdefgh12345678");
    assert_eq!(out, "Bearer [redacted]");
    redacts("pass\u{200d}word: hunter2", "hunter2");
    redacts("api\u{00ad} token\u{2060}: abc123xyz", "abc123xyz");
    redacts("\u{feff}secret\u{200c} = abc123", "abc123");
    redacts("ｐａｓｓｗｏｒｄ：hunter2", "hunter2");
    redacts("password:\u{3000}hunter2", "hunter2");
    redacts("sk-\u{200b}live-0123456789abcdef", "0123456789abcdef");
    assert!(looks_like_credential("to\u{200b}ken"));
}

#[test]
fn prose_and_plain_words_stay() {
    for prose in [
        "How do bearer tokens and API keys differ in token-based auth?",
        "The token: a unit of text",
        "Token economics: password policy",
        "password: is required",
        "max_tokens: 1000 and passwords: 3",
        "See https://example.org/password?x=1 for the policy",
        "a == b and c := d; x => y",
        "secret: no",
        "my password: [redacted]",
        "Unicode text — naïve café ☕ with emoji 👩‍👩‍👧",
    ] {
        assert!(!text_carries_credential(prose), "{prose}");
        assert_eq!(redact_text(prose), prose, "unchanged: {prose}");
    }
}

#[test]
fn secret_values_under_object_keys() {
    assert!(secret_value("password", "hunter2"));
    assert!(secret_value("client_secret", "abc"));
    assert!(secret_value("apiToken", "abc"));
    assert!(!secret_value("token", "abc"), "a weak name needs a longer value");
    assert!(secret_value("token", "abcdefgh"));
    assert!(!secret_value("name", "hunter2"));
    assert!(!secret_value("password", REDACTED));
}

#[test]
fn identifiers_keep_their_own_grammar() {
    assert!(!identifier_carries_credential("run_0123456789abcdef0123456789abcdef"));
    assert!(identifier_carries_credential("q:password=hunter2"));
    assert!(identifier_carries_credential("Bearer\u{200b}abcdefgh12345678"));
}

const NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "client secret",
    "client_secret",
    "client-secret",
    "api key",
    "api_key",
    "api token",
    "access token",
    "access_token",
    "refresh token",
    "bearer",
    "authorization",
    "private key",
    "private_key",
    "secret key",
    "my password",
    "db password",
];

fn cased(name: &str, case: u8) -> String {
    match case {
        0 => name.to_owned(),
        1 => name.to_uppercase(),
        _ => {
            let mut c = name.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
        }
    }
}

fn with_format_char(name: &str, at: usize, which: usize) -> String {
    const FORMAT: &[char] = &['\u{200b}', '\u{200c}', '\u{200d}', '\u{2060}', '\u{feff}', '\u{00ad}'];
    let at = at % (name.chars().count() + 1);
    let mut out: String = name.chars().take(at).collect();
    out.push(FORMAT[which % FORMAT.len()]);
    out.extend(name.chars().skip(at));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_name_value_forms_are_detected_and_their_values_never_survive(
        name in prop::sample::select(NAMES),
        sep in prop::sample::select(&[":", "=", "\": \"", " : ", " = ", ":=", "\":\""][..]),
        case in 0u8..3,
        zw in prop::option::of((0usize..32, 0usize..6)),
        value in "[A-Za-z0-9._~+/-]{3,24}[0-9]",
        prefix in prop::sample::select(&["", "note ", "{\"", "x=1; ", "hello, "][..]),
        suffix in prop::sample::select(&["", "\"}", " and more", ", next", "\n"][..]),
    ) {
        let mut name = cased(name, case);
        if let Some((at, which)) = zw {
            name = with_format_char(&name, at, which);
        }
        let (open, close) = if sep.starts_with('"') { ("\"", "\"") } else { ("", "") };
        let text = format!("{prefix}{open}{name}{sep}{value}{close}{suffix}");
        prop_assert!(text_carries_credential(&text), "not detected: {:?}", text);
        let out = redact_text(&text);
        prop_assert!(!out.contains(&value), "{:?} survives in {:?}", value, out);
        prop_assert!(out.contains(REDACTED));
    }
}
