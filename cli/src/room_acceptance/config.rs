//! The harness's configuration: only `HELIX_SHARED_ROOM_ACCEPTANCE_*` environment
//! variables, each validated before anything else happens. A malformed or out-of-range
//! value is a typed error naming the variable, never its value, and no request is sent.

use std::net::IpAddr;
use std::time::Duration;

pub const PREFIX: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_";
pub const BASE_URL: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_BASE_URL";
pub const NETWORK: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_NETWORK";
pub const ALLOW_LOOPBACK_HTTP: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_ALLOW_LOOPBACK_HTTP";
pub const ACCESS_TOKEN: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_ACCESS_TOKEN";
pub const ALLOW_MUTATION: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_ALLOW_MUTATION";
pub const TIMEOUT_MS: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_TIMEOUT_MS";
pub const TOTAL_TIMEOUT_MS: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_TOTAL_TIMEOUT_MS";
pub const REQUIRE_COMPLETE: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_REQUIRE_COMPLETE";
pub const ROOM_IDEMPOTENCY_KEY: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_ROOM_IDEMPOTENCY_KEY";

/// Every variable the harness reads. Any other `HELIX_SHARED_ROOM_ACCEPTANCE_*` name is
/// refused: a misspelt opt-in must not silently mean "off", and there is deliberately no
/// variable for a cookie, a chat claim or a source bearer.
pub const KNOWN: &[&str] = &[
    BASE_URL,
    NETWORK,
    ALLOW_LOOPBACK_HTTP,
    ACCESS_TOKEN,
    ALLOW_MUTATION,
    TIMEOUT_MS,
    TOTAL_TIMEOUT_MS,
    REQUIRE_COMPLETE,
    ROOM_IDEMPOTENCY_KEY,
];

pub const DEFAULT_BASE_URL: &str = "https://casimirbot.com";
pub const DEFAULT_ROOM_IDEMPOTENCY_KEY: &str = "helix-shared-room-live-acceptance-v1";
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_TOTAL_TIMEOUT_MS: u64 = 600_000;
const TIMEOUT_RANGE: (u64, u64) = (1_000, 600_000);
const TOTAL_RANGE: (u64, u64) = (30_000, 3_600_000);
const TOKEN_MAX: usize = 16 * 1024;

/// One refused variable: its name and what is wrong, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub code: &'static str,
    pub variable: String,
    pub reason: String,
}

impl ConfigError {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code, "variable": self.variable, "reason": self.reason })
    }
}

fn err(code: &'static str, variable: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError { code, variable: variable.to_owned(), reason: reason.into() }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Scheme, host and port only (no path, query, fragment or userinfo).
    pub base_url: reqwest::Url,
    pub loopback_http: bool,
    pub network: bool,
    pub allow_loopback_http: bool,
    pub allow_mutation: bool,
    pub require_complete: bool,
    /// Only for the Authorization header; never serialised, never printed.
    pub access_token: Option<String>,
    pub request_timeout: Duration,
    pub total_timeout: Duration,
    pub cleanup_reserve: Duration,
    pub room_key: String,
    pub room_key_from_env: bool,
}

impl Config {
    /// True when the harness may send requests at all.
    pub fn live(&self) -> bool {
        self.network
    }
}

/// The time kept back from the automated steps for cleanup: half the total at most, and
/// otherwise four request timeouts (withdrawal and cancel, each retried once), at least
/// 10 s.
pub fn cleanup_reserve(request: Duration, total: Duration) -> Duration {
    (request * 4).max(Duration::from_secs(10)).min(total / 2)
}

/// Reads every variable through `lookup` (`None`: unset; `Some(Err(()))`: not UTF-8) and
/// `names` (every variable name in the environment, for the unknown-name check).
pub fn from_lookup(
    lookup: &dyn Fn(&str) -> Option<Result<String, ()>>,
    names: &[String],
) -> Result<Config, Vec<ConfigError>> {
    let mut errors = Vec::new();
    for name in names.iter().filter(|n| n.starts_with(PREFIX) && !KNOWN.contains(&n.as_str())) {
        errors.push(err(
            "unknown_variable",
            name,
            "not a variable of this harness (it takes no cookie, chat claim or source bearer)",
        ));
    }
    let mut get = |name: &str| match lookup(name) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(())) => {
            errors.push(err("malformed_value", name, "not valid UTF-8"));
            None
        }
    };
    let raw: Vec<Option<String>> = KNOWN.iter().map(|n| get(n)).collect();
    let value = |name: &str| raw[KNOWN.iter().position(|n| *n == name).expect("known variable")].as_deref();

    let mut flag = |name: &str| match value(name) {
        None => false,
        Some("1") => true,
        Some("0") => false,
        Some(_) => {
            errors.push(err("malformed_value", name, "must be 1 or 0"));
            false
        }
    };
    let network = flag(NETWORK);
    let allow_loopback_http = flag(ALLOW_LOOPBACK_HTTP);
    let allow_mutation = flag(ALLOW_MUTATION);
    let require_complete = flag(REQUIRE_COMPLETE);

    let mut millis = |name: &str, default: u64, (lo, hi): (u64, u64)| match value(name) {
        None => default,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if v.bytes().all(|b| b.is_ascii_digit()) && (lo..=hi).contains(&n) => n,
            Ok(_) if v.bytes().all(|b| b.is_ascii_digit()) => {
                errors.push(err("out_of_range", name, format!("must be {lo} through {hi} milliseconds")));
                default
            }
            _ => {
                errors.push(err("malformed_value", name, "must be a whole number of milliseconds"));
                default
            }
        },
    };
    let request_timeout = Duration::from_millis(millis(TIMEOUT_MS, DEFAULT_TIMEOUT_MS, TIMEOUT_RANGE));
    let total_timeout = Duration::from_millis(millis(TOTAL_TIMEOUT_MS, DEFAULT_TOTAL_TIMEOUT_MS, TOTAL_RANGE));

    let access_token = match value(ACCESS_TOKEN) {
        None => None,
        Some(t) if t.is_empty() || t.len() > TOKEN_MAX || !t.bytes().all(|b| b.is_ascii_graphic()) => {
            errors.push(err("malformed_value", ACCESS_TOKEN, "must be 1-16384 visible ASCII characters"));
            None
        }
        Some(t) => Some(t.to_owned()),
    };
    if network && access_token.is_none() && !errors.iter().any(|e| e.variable == ACCESS_TOKEN) {
        errors.push(err("missing_value", ACCESS_TOKEN, "the network opt-in needs the OAuth access token"));
    }

    let (room_key, room_key_from_env) = match value(ROOM_IDEMPOTENCY_KEY) {
        None => (DEFAULT_ROOM_IDEMPOTENCY_KEY.to_owned(), false),
        Some(k) if (8..=200).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()) => (k.to_owned(), true),
        Some(_) => {
            errors.push(err("malformed_value", ROOM_IDEMPOTENCY_KEY, "must be 8-200 visible ASCII characters"));
            (DEFAULT_ROOM_IDEMPOTENCY_KEY.to_owned(), true)
        }
    };

    let target = base_url(value(BASE_URL).unwrap_or(DEFAULT_BASE_URL), allow_loopback_http);
    if let Err(e) = &target {
        errors.push(e.clone());
    }
    match target {
        Ok((base_url, loopback_http)) if errors.is_empty() => Ok(Config {
            base_url,
            loopback_http,
            network,
            allow_loopback_http,
            allow_mutation,
            require_complete,
            access_token,
            request_timeout,
            total_timeout,
            cleanup_reserve: cleanup_reserve(request_timeout, total_timeout),
            room_key,
            room_key_from_env,
        }),
        _ => Err(errors),
    }
}

/// `https://host[:port]`, or `http://` to a literal loopback address with the opt-in.
/// Returns the URL and whether it is plain loopback HTTP.
fn base_url(raw: &str, allow_loopback_http: bool) -> Result<(reqwest::Url, bool), ConfigError> {
    let bad = |reason: &str| err("invalid_base_url", BASE_URL, reason);
    let url = reqwest::Url::parse(raw).map_err(|_| bad("not an absolute URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not carry user information"));
    }
    if url.query().is_some() || url.fragment().is_some() || url.path() != "/" {
        return Err(bad("must be scheme, host and port only (no path, query or fragment)"));
    }
    let host = url.host_str().ok_or_else(|| bad("has no host"))?;
    match url.scheme() {
        "https" => Ok((url, false)),
        "http" => {
            let ip: Option<IpAddr> = host.trim_start_matches('[').trim_end_matches(']').parse().ok();
            if !ip.is_some_and(|ip| ip.is_loopback()) {
                return Err(bad("plain http is refused except to a literal loopback address"));
            }
            if !allow_loopback_http {
                return Err(bad("plain http to loopback needs HELIX_SHARED_ROOM_ACCEPTANCE_ALLOW_LOOPBACK_HTTP=1"));
            }
            Ok((url, true))
        }
        _ => Err(bad("must be https (or http to loopback with the opt-in)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, Vec<ConfigError>> {
        let owned: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let names: Vec<String> = owned.iter().map(|(k, _)| k.clone()).collect();
        let lookup = move |n: &str| owned.iter().find(|(k, _)| k == n).map(|(_, v)| Ok(v.clone()));
        from_lookup(&lookup, &names)
    }

    fn refused(vars: &[(&str, &str)]) -> Vec<String> {
        config(vars).expect_err("refused").into_iter().map(|e| format!("{}:{}", e.variable, e.code)).collect()
    }

    #[test]
    fn defaults_are_a_dry_run_against_the_public_host() {
        let c = config(&[]).unwrap();
        assert_eq!(c.base_url.as_str(), "https://casimirbot.com/");
        assert!(!c.live() && !c.allow_mutation && !c.require_complete && c.access_token.is_none());
        assert_eq!(c.request_timeout, Duration::from_millis(30_000));
        assert_eq!(c.total_timeout, Duration::from_millis(600_000));
        assert_eq!(c.cleanup_reserve, Duration::from_millis(120_000));
        assert_eq!(c.room_key, DEFAULT_ROOM_IDEMPOTENCY_KEY);
    }

    #[test]
    fn timeouts_are_bounded_at_both_ends() {
        assert!(config(&[(TIMEOUT_MS, "1000"), (TOTAL_TIMEOUT_MS, "30000")]).is_ok());
        assert!(config(&[(TIMEOUT_MS, "600000"), (TOTAL_TIMEOUT_MS, "3600000")]).is_ok());
        for (name, v) in [(TIMEOUT_MS, "999"), (TIMEOUT_MS, "600001"), (TOTAL_TIMEOUT_MS, "29999")] {
            assert_eq!(refused(&[(name, v)]), vec![format!("{name}:out_of_range")]);
        }
        for v in ["", "abc", "+5000", "5000 ", "1e4", "-1", "99999999999999999999999"] {
            assert_eq!(refused(&[(TIMEOUT_MS, v)]), vec![format!("{TIMEOUT_MS}:malformed_value")], "{v:?}");
        }
    }

    #[test]
    fn the_cleanup_reserve_fits_inside_the_total() {
        let ms = Duration::from_millis;
        assert_eq!(cleanup_reserve(ms(1_000), ms(30_000)), ms(10_000));
        assert_eq!(cleanup_reserve(ms(600_000), ms(30_000)), ms(15_000));
        assert_eq!(cleanup_reserve(ms(600_000), ms(3_600_000)), ms(1_800_000));
    }

    #[test]
    fn plain_http_only_to_loopback_and_only_with_the_opt_in() {
        let http = |url: &str, opt: &str| config(&[(BASE_URL, url), (ALLOW_LOOPBACK_HTTP, opt)]);
        assert!(http("http://127.0.0.1:9000", "1").unwrap().loopback_http);
        assert!(http("http://[::1]:9000", "1").is_ok());
        for (url, opt) in [
            ("http://127.0.0.1:9000", "0"),
            ("http://localhost:9000", "1"),
            ("http://10.0.0.1", "1"),
            ("ftp://127.0.0.1", "1"),
            ("https://user:pw@casimirbot.com", "0"),
            ("https://casimirbot.com/api", "0"),
            ("https://casimirbot.com/?x=1", "0"),
            ("casimirbot.com", "0"),
        ] {
            assert_eq!(
                refused(&[(BASE_URL, url), (ALLOW_LOOPBACK_HTTP, opt)]),
                vec![format!("{BASE_URL}:invalid_base_url")]
            );
        }
    }

    #[test]
    fn flags_keys_tokens_and_unknown_names_are_checked() {
        assert_eq!(refused(&[(NETWORK, "yes")]), vec![format!("{NETWORK}:malformed_value")]);
        assert_eq!(refused(&[(NETWORK, "1")]), vec![format!("{ACCESS_TOKEN}:missing_value")]);
        assert_eq!(refused(&[(ACCESS_TOKEN, "a b")]), vec![format!("{ACCESS_TOKEN}:malformed_value")]);
        assert_eq!(
            refused(&[(ROOM_IDEMPOTENCY_KEY, "short")]),
            vec![format!("{ROOM_IDEMPOTENCY_KEY}:malformed_value")]
        );
        let cookie = "HELIX_SHARED_ROOM_ACCEPTANCE_COOKIE";
        assert_eq!(refused(&[(cookie, "x")]), vec![format!("{cookie}:unknown_variable")]);
        let c = config(&[(ROOM_IDEMPOTENCY_KEY, "release-room-0001"), (NETWORK, "1"), (ACCESS_TOKEN, "t0k")]).unwrap();
        assert!(c.live() && c.room_key_from_env && c.room_key == "release-room-0001");
    }
}
