//! Secrets from the deployment secret store (AWS Secrets Manager), read once at cold start.
//!
//! Any variable `<VAR>` may be given as `<VAR>_SECRET_ARN` instead: the name or ARN of a
//! Secrets Manager secret whose `SecretString` is the value. The loader reads each one
//! once, before the typed configuration, and the configuration then sees `<VAR>` as if it
//! were set; nothing else changes, so every later secret uses the same mechanism with no
//! new code. Giving both `<VAR>` and `<VAR>_SECRET_ARN` is refused (which one was meant?).
//!
//! A secret that is missing, unreadable or empty fails start with the variable's name,
//! the secret id and the service's error code, never the value (nor the service's error
//! message, which is not ours to trust). With no `*_SECRET_ARN` variable no client is
//! built and nothing is called: local and test runs keep environment and file values.
//! The endpoint is the SDK's (`AWS_ENDPOINT_URL_SECRETS_MANAGER` overrides it).

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::error::ProvideErrorMetadata;

use super::Secret;

/// The suffix naming a variable's secret: `HELIX_ASK_BEARER_TOKEN_SECRET_ARN`.
pub const SECRET_ARN_SUFFIX: &str = "_SECRET_ARN";
/// No secret read may hold a cold start longer than this (retries included).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One variable to fill from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// The variable the configuration reads, e.g. `HELIX_ASK_BEARER_TOKEN`.
    pub var: String,
    /// The secret's name or ARN (not a secret itself).
    pub secret_id: String,
}

/// Why the secrets could not be read. Never carries a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretStoreError {
    #[error("{var} and {var}{SECRET_ARN_SUFFIX} are both set; set only one")]
    Ambiguous { var: String },
    #[error("secret {secret_id} for {var} ({var}{SECRET_ARN_SUFFIX}) was not found")]
    NotFound { var: String, secret_id: String },
    #[error("secret {secret_id} for {var} ({var}{SECRET_ARN_SUFFIX}) cannot be read: {reason}")]
    Unreadable { var: String, secret_id: String, reason: String },
}

/// The values read, by variable name. `Debug` prints names only.
#[derive(Clone, Default)]
pub struct SecretOverlay(BTreeMap<String, Secret>);

impl std::fmt::Debug for SecretOverlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl SecretOverlay {
    /// The value of `var` when it came from the store.
    pub fn get(&self, var: &str) -> Option<String> {
        self.0.get(var).map(|s| s.expose().to_owned())
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// Every `<VAR>_SECRET_ARN` of `vars` (name, value pairs, e.g. `std::env::vars()`),
/// sorted by variable. Empty values count as unset, as everywhere in the configuration.
pub fn secret_refs(vars: impl IntoIterator<Item = (String, String)>) -> Result<Vec<SecretRef>, SecretStoreError> {
    let vars: BTreeMap<String, String> =
        vars.into_iter().map(|(k, v)| (k, v.trim().to_owned())).filter(|(_, v)| !v.is_empty()).collect();
    let mut refs = vec![];
    for (name, value) in &vars {
        let Some(var) = name.strip_suffix(SECRET_ARN_SUFFIX).filter(|v| !v.is_empty()) else { continue };
        if vars.contains_key(var) {
            return Err(SecretStoreError::Ambiguous { var: var.to_owned() });
        }
        refs.push(SecretRef { var: var.to_owned(), secret_id: value.clone() });
    }
    Ok(refs)
}

/// Reads every ref with `client`, one `GetSecretValue` each.
pub async fn load(client: &Client, refs: &[SecretRef]) -> Result<SecretOverlay, SecretStoreError> {
    let mut values = BTreeMap::new();
    for r in refs {
        let unreadable = |reason: &str| SecretStoreError::Unreadable {
            var: r.var.clone(),
            secret_id: r.secret_id.clone(),
            reason: reason.to_owned(),
        };
        let out = client.get_secret_value().secret_id(&r.secret_id).send().await.map_err(|e| {
            let code = e.code().map(str::to_owned);
            match code.as_deref() {
                Some("ResourceNotFoundException") => {
                    SecretStoreError::NotFound { var: r.var.clone(), secret_id: r.secret_id.clone() }
                }
                // Only the service's error code, a fixed identifier: its message is not ours.
                Some(code) if code.len() <= 64 && code.chars().all(|c| c.is_ascii_alphanumeric()) => unreadable(code),
                Some(_) => unreadable("the service refused the request"),
                None => unreadable("the secret store did not answer"),
            }
        })?;
        let value = out.secret_string().map(str::trim).filter(|v| !v.is_empty());
        let value = value.ok_or_else(|| unreadable("it has no text value (SecretString)"))?;
        tracing::info!(var = r.var.as_str(), "secret read from the secret store");
        values.insert(r.var.clone(), Secret::new(value));
    }
    Ok(SecretOverlay(values))
}

/// The cold-start path: the refs of the process environment, read with the SDK's default
/// configuration (region, role credentials, endpoint overrides). No refs: no client.
pub async fn load_from_env() -> Result<SecretOverlay, SecretStoreError> {
    let vars = std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let refs = secret_refs(vars)?;
    if refs.is_empty() {
        return Ok(SecretOverlay::default());
    }
    load(&Client::new(&crate::aws_sdk::sdk_config(Some(READ_TIMEOUT)).await), &refs).await
}

#[cfg(test)]
mod tests;
