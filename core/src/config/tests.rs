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

mod approval_registry {
    use super::*;
    use crate::domain::approval::{APPROVAL_KEYS_VAR, ApprovalSigner};

    const SEED: [u8; 32] = [5; 32];

    fn entry(issuer: &str, key_id: &str, seed: [u8; 32]) -> serde_json::Value {
        ApprovalSigner::from_seed(issuer, key_id, seed).registry_entry()
    }

    fn with_registry(json: &str) -> Result<Config, ConfigError> {
        let vars: Vec<(&str, &str)> = PROD.iter().copied().chain([(APPROVAL_KEYS_VAR, json)]).collect();
        cfg(DefaultMode::Production, &vars)
    }

    /// The problem of a refused start (the variable is always the one named).
    fn refused(json: &str) -> String {
        match with_registry(json) {
            Err(ConfigError::Malformed { name, problem }) => {
                assert_eq!(name, APPROVAL_KEYS_VAR);
                problem
            }
            other => panic!("expected a refused start, got {:?}", other.map(|c| c.approval_keys.len())),
        }
    }

    #[test]
    fn a_valid_registry_installs_each_exact_issuer_and_key_id() {
        let json = serde_json::json!([entry("host-a", "k1", SEED), entry("host-b", "k1", [6; 32])]).to_string();
        assert_eq!(with_registry(&json).unwrap().approval_keys.len(), 2);
    }

    #[test]
    fn a_missing_or_empty_registry_starts_with_no_approval_host() {
        assert!(cfg(DefaultMode::Production, PROD).unwrap().approval_keys.is_empty());
        assert!(with_registry("").unwrap().approval_keys.is_empty());
        assert!(with_registry("[]").unwrap().approval_keys.is_empty());
    }

    #[test]
    fn a_malformed_registry_refuses_start() {
        for json in [
            "not json",
            "{\"issuer\":\"a\"}",
            "[{\"issuer\":\"a\",\"key_id\":\"k\"}]",
            "[{\"issuer\":\"a\",\"key_id\":\"k\",\"public_key\":\"!!\"}]",
            "[{\"issuer\":\"a\",\"key_id\":\"k\",\"public_key\":\"AAAA\"}]",
            "[{\"issuer\":\"\",\"key_id\":\"k\",\"public_key\":\"AAAA\"}]",
        ] {
            refused(json);
        }
        let mut extra = entry("a", "k", SEED);
        extra["use"] = "sig".into();
        assert!(refused(&serde_json::json!([extra]).to_string()).contains("unknown field"));
        let many: Vec<serde_json::Value> = (0..17u8).map(|i| entry("a", &format!("k{i}"), [i + 1; 32])).collect();
        assert!(refused(&serde_json::json!(many).to_string()).contains("at most 16"));
        let long = "x".repeat(201);
        assert!(refused(&serde_json::json!([entry(&long, "k", SEED)]).to_string()).contains("1-200"));
    }

    #[test]
    fn a_duplicate_issuer_and_key_id_is_ambiguous_and_refuses_start() {
        let json = serde_json::json!([entry("host", "k1", SEED), entry("host", "k1", [6; 32])]).to_string();
        assert!(refused(&json).contains("ambiguous"));
        let same_key = serde_json::json!([entry("host", "k1", SEED), entry("host", "k2", SEED)]).to_string();
        assert!(refused(&same_key).contains("ambiguous"));
    }

    #[test]
    fn private_key_material_is_refused_and_never_printed() {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let signer = ApprovalSigner::from_seed("host", "k1", SEED);
        let public = signer.verifying_key().to_bytes();
        let mut pair = SEED.to_vec();
        pair.extend_from_slice(&public);
        let seed = b64(&SEED);
        let cases = [
            serde_json::json!([{ "issuer": "host", "key_id": "k1", "public_key": b64(&public), "d": seed }]),
            serde_json::json!([{ "issuer": "host", "key_id": "k1", "public_key": b64(&public), "private_key": seed }]),
            serde_json::json!([{ "issuer": "host", "key_id": "k1", "public_key": b64(&pair) }]),
            serde_json::json!([{ "issuer": "host", "key_id": "k1", "seed": seed }]),
        ];
        for json in cases {
            let problem = refused(&json.to_string());
            assert!(problem.contains("private key"), "{problem}");
            let shown = ConfigError::Malformed { name: APPROVAL_KEYS_VAR, problem }.to_string();
            assert!(!shown.contains(&seed) && !shown.contains(&b64(&public)), "no key material: {shown}");
        }
    }
}
