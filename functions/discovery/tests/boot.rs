//! The discovery function's cold start: it builds no outbound HTTPS client, so it starts
//! without reading the root certificates (the first request that needs a client builds
//! it: `helix_core::outbound`).

use std::process::Command;

#[test]
fn the_function_starts_without_reading_the_root_certificates() {
    // A complete production configuration (OAuth with a key-set URL, a browser OpenID
    // provider, a Helix Ask endpoint) and no readable root store: the function gets as
    // far as the Lambda runtime (closed here: a connect error), where building any of
    // its HTTPS clients at start would have failed it first.
    let out = Command::new(env!("CARGO_BIN_EXE_helix-discovery"))
        .env_clear()
        .env("HELIX_ENV", "production")
        .env("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com")
        .env("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/")
        .env("HELIX_AGENT_OAUTH_AUDIENCE", "https://api.example.com/mcp")
        .env("HELIX_AGENT_OAUTH_JWKS_URL", "https://issuer.example.com/.well-known/jwks.json")
        .env("HELIX_AGENT_OAUTH_PROVIDER", "auth0")
        .env("HELIX_AGENT_ALLOWED_HOSTS", "api.example.com")
        .env("TRUST_PROXY", "apigateway")
        .env("HELIX_BROWSER_OIDC_ISSUER", "https://issuer.example.com/")
        .env("HELIX_BROWSER_OIDC_CLIENT_ID", "boot-test")
        .env("HELIX_BROWSER_OIDC_CLIENT_SECRET", "boot-test-client-secret")
        .env("HELIX_ASK_ENDPOINT", "https://ask.example.com/v1/turns")
        .env("HELIX_ASK_BEARER_TOKEN", "boot-test-ask-bearer-0123456789abcdef")
        .env("SSL_CERT_FILE", "/nonexistent/helix-boot-test/roots.pem")
        .env("SSL_CERT_DIR", "/nonexistent/helix-boot-test")
        .env("AWS_LAMBDA_FUNCTION_NAME", "helix-discovery")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "no panic at start: {stderr}");
    assert!(stderr.contains("127.0.0.1:9"), "reached the runtime API: {stderr}");
}
