//! Which turn executor the service calls (`HELIX_ASK_*`, `HELIX_LOCAL_CORPUS_DIR`).
//! Reads variables only through `Env`; depends on nothing outside `config`.

use super::{ConfigError, Env, Secret};

#[derive(Debug, Clone)]
pub enum ExecutorConfig {
    /// POST turns to a Helix Ask endpoint, authenticated with a bearer token.
    Http { endpoint: String, bearer: Option<Secret> },
    /// Offline solver over a corpus on disk (development only).
    Local { corpus_dir: Option<std::path::PathBuf> },
    /// No executor: continuations fail their step as `executor_unavailable`.
    None,
}

pub(super) fn executor(env: &Env, prod: bool) -> Result<ExecutorConfig, ConfigError> {
    Ok(match env.get("HELIX_ASK_ENDPOINT") {
        Some(endpoint) => {
            if prod && !endpoint.starts_with("https://") {
                return Err(ConfigError::UnsafeProduction("HELIX_ASK_ENDPOINT must be https".into()));
            }
            let bearer = env.get("HELIX_ASK_BEARER_TOKEN").map(Secret::new);
            if prod && bearer.is_none() {
                return Err(ConfigError::Missing("HELIX_ASK_BEARER_TOKEN (required with HELIX_ASK_ENDPOINT)"));
            }
            ExecutorConfig::Http { endpoint, bearer }
        }
        None if prod => ExecutorConfig::None,
        None => ExecutorConfig::Local { corpus_dir: env.get("HELIX_LOCAL_CORPUS_DIR").map(Into::into) },
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{PROD, cfg};
    use crate::config::{ConfigError, DefaultMode, ExecutorConfig};

    #[test]
    fn production_helix_ask_needs_https_and_a_bearer() {
        let mut vars = PROD.to_vec();
        vars.push(("HELIX_ASK_ENDPOINT", "https://ask.example.com/v1/turns"));
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::Missing(_))));
        vars.push(("HELIX_ASK_BEARER_TOKEN", "ask-service-credential"));
        let c = cfg(DefaultMode::Production, &vars).unwrap();
        assert!(matches!(c.executor, ExecutorConfig::Http { bearer: Some(_), .. }));
        assert!(!format!("{c:?}").contains("ask-service-credential"));
        let mut http = PROD.to_vec();
        http.push(("HELIX_ASK_ENDPOINT", "http://ask.example.com/v1/turns"));
        http.push(("HELIX_ASK_BEARER_TOKEN", "x"));
        assert!(matches!(cfg(DefaultMode::Production, &http), Err(ConfigError::UnsafeProduction(_))));
    }
}
