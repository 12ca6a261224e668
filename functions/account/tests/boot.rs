//! The account function defaults to production and refuses to start without a complete
//! browser OpenID Connect configuration.

use std::process::Command;

const PROD: &[(&str, &str)] = &[
    ("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com"),
    ("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/"),
    ("HELIX_AGENT_OAUTH_AUDIENCE", "https://api.example.com/mcp"),
    ("HELIX_AGENT_OAUTH_JWKS_URL", "https://issuer.example.com/.well-known/jwks.json"),
    ("HELIX_AGENT_OAUTH_PROVIDER", "auth0"),
    ("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com"),
    ("TRUST_PROXY", "apigateway"),
    ("HELIX_TABLE_NAME", "helix"),
    ("AWS_REGION", "us-east-1"),
    // Never reached: the function refuses before it asks the runtime for an event.
    ("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9"),
];

fn boot(extra: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_helix-account"))
        .env_clear()
        .envs(PROD.iter().copied())
        .envs(extra.iter().copied())
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_account_function_refuses_to_start_without_a_browser_provider() {
    assert!(boot(&[]).contains("HELIX_BROWSER_OIDC_ISSUER"));
}

#[test]
fn the_account_function_refuses_incomplete_or_unsafe_browser_settings() {
    let stderr = boot(&[("HELIX_BROWSER_OIDC_ISSUER", "https://issuer.example.com/")]);
    assert!(stderr.contains("HELIX_BROWSER_OIDC_CLIENT_ID"), "{stderr}");
    let stderr =
        boot(&[("HELIX_BROWSER_OIDC_ISSUER", "https://issuer.example.com/"), ("HELIX_BROWSER_OIDC_CLIENT_ID", "web")]);
    assert!(stderr.contains("HELIX_BROWSER_OIDC_CLIENT_SECRET"), "{stderr}");
    let stderr = boot(&[
        ("HELIX_BROWSER_OIDC_ISSUER", "https://other.example.com/"),
        ("HELIX_BROWSER_OIDC_CLIENT_ID", "web"),
        ("HELIX_BROWSER_OIDC_CLIENT_SECRET", "0123456789abcdef"),
    ]);
    assert!(stderr.contains("HELIX_AGENT_OAUTH_ISSUER"), "{stderr}");
    let stderr = boot(&[("HELIX_BROWSER_DEV_PROVIDER", "1")]);
    assert!(stderr.contains("development"), "{stderr}");
}
