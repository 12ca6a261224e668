//! The AWS SDK's configuration: one loader for every client (the DynamoDB store, the
//! secret store's reads, the worker's self-invocation).
//!
//! Inside a Lambda function (`AWS_LAMBDA_FUNCTION_NAME` set) the credentials are the
//! execution role's, which the Lambda runtime puts in the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`); only that source
//! is built. The SDK's default chain would also build, at every cold start, a web-identity
//! provider with an STS client of its own, whose HTTPS connector loads and parses the
//! platform's trust store once more, for a source a function never uses. Missing
//! variables fail the first call (no credentials), never fall back to another source.
//! Elsewhere (the CLI, tests) the default chain: variables, profiles, SSO, web identity,
//! container and instance metadata.

use std::time::Duration;

use aws_config::{BehaviorVersion, SdkConfig};

/// The variable the Lambda runtime sets in every function's environment.
const LAMBDA_FUNCTION_NAME: &str = "AWS_LAMBDA_FUNCTION_NAME";

/// The SDK configuration for a client, each operation bounded by `operation_timeout`
/// (retries included) when given.
pub async fn sdk_config(operation_timeout: Option<Duration>) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if in_lambda() {
        loader = loader.credentials_provider(aws_config::environment::EnvironmentVariableCredentialsProvider::new());
    }
    if let Some(timeout) = operation_timeout {
        loader =
            loader.timeout_config(aws_config::timeout::TimeoutConfig::builder().operation_timeout(timeout).build());
    }
    loader.load().await
}

/// True inside a Lambda function.
fn in_lambda() -> bool {
    lambda_function_name().is_some()
}

/// The Lambda function this process runs as; `None` outside one.
pub fn lambda_function_name() -> Option<String> {
    std::env::var(LAMBDA_FUNCTION_NAME).ok().filter(|f| !f.is_empty())
}

/// The trust store a deployment names (`SSL_CERT_FILE`, read by the SDK's HTTPS client
/// instead of every file of the platform's certificate directories): a path that is not
/// a file fails the start, where otherwise every call to AWS would fail its TLS
/// handshake. Unset: the platform's locations, as the SDK finds them.
pub fn check_trust_store() -> Result<(), TrustStoreError> {
    trust_store_file(std::env::var_os("SSL_CERT_FILE").as_deref())
}

fn trust_store_file(ssl_cert_file: Option<&std::ffi::OsStr>) -> Result<(), TrustStoreError> {
    let Some(path) = ssl_cert_file.filter(|p| !p.is_empty()) else { return Ok(()) };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        _ => Err(TrustStoreError(std::path::PathBuf::from(path))),
    }
}

/// `SSL_CERT_FILE` names no file.
#[derive(Debug, thiserror::Error)]
#[error("SSL_CERT_FILE names no file: {}", .0.display())]
pub struct TrustStoreError(pub std::path::PathBuf);

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_trust_store_check_admits_a_file_or_nothing_and_refuses_anything_else() {
        let file = std::env::temp_dir().join(format!("helix-trust-{}.pem", std::process::id()));
        std::fs::write(&file, "-----BEGIN CERTIFICATE-----\n").unwrap();
        assert!(trust_store_file(Some(file.as_os_str())).is_ok());
        assert!(trust_store_file(None).is_ok());
        assert!(trust_store_file(Some(OsStr::new(""))).is_ok());
        let missing = trust_store_file(Some(OsStr::new("/nonexistent/helix/ca-bundle.crt"))).unwrap_err();
        assert_eq!(missing.to_string(), "SSL_CERT_FILE names no file: /nonexistent/helix/ca-bundle.crt");
        assert!(trust_store_file(Some(std::env::temp_dir().as_os_str())).is_err());
        let _ = std::fs::remove_file(&file);
    }
}
