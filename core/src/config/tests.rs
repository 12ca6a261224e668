//! The config's test helpers (also used by other modules' unit tests) and the tests of
//! the steps as a whole.

use std::collections::HashMap;
use std::time::Duration;

use jsonwebtoken::Algorithm;

use super::*;

/// The development configuration with the local HS256 path, for unit tests elsewhere.
pub(crate) fn dev_config() -> Config {
    cfg(
        DefaultMode::Development,
        &[("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"), ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef")],
    )
    .unwrap()
}

pub(super) fn cfg(mode: DefaultMode, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Config::from_lookup(mode, &move |k| map.get(k).cloned())
}

pub(super) const PROD: &[(&str, &str)] = &[
    ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
    ("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/"),
    ("HELIX_AGENT_OAUTH_AUDIENCE", "https://api.example.com/mcp"),
    ("HELIX_AGENT_OAUTH_JWKS_URL", "https://issuer.example.com/.well-known/jwks.json"),
    ("HELIX_AGENT_OAUTH_PROVIDER", "auth0"),
    ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
    ("TRUST_PROXY", "apigateway"),
];

pub(super) fn prod_with(changes: &[(&'static str, &'static str)]) -> Result<Config, ConfigError> {
    let mut vars = PROD.to_vec();
    for (k, v) in changes {
        vars.retain(|(name, _)| name != k);
        vars.push((k, v));
    }
    cfg(DefaultMode::Production, &vars)
}

#[test]
fn turn_timeout_is_clamped_and_lease_is_at_least_two_minutes() {
    let ok = [
        ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
        ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
        ("HELIX_AGENT_TURN_TIMEOUT_MS", "5"),
    ];
    let c = cfg(DefaultMode::Development, &ok).unwrap();
    assert_eq!(c.turn_timeout, Duration::from_secs(1));
    assert_eq!(c.lease(), Duration::from_secs(120));
}

#[test]
fn production_starts_with_complete_oauth_config() {
    let c = cfg(DefaultMode::Production, PROD).unwrap();
    assert_eq!(c.mode, Mode::Production);
    assert_eq!(c.oauth.algorithms, vec![Algorithm::RS256]);
    assert_eq!(c.turn_timeout, Duration::from_secs(120));
    assert_eq!(c.agent_limits.body_bytes, 256 * 1024);
}
