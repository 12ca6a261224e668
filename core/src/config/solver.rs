//! The reference turn service's configuration (`helix solver serve`, the solver function):
//! its bearer, its terminal signing key and its corpus. Read through `Env` only.

use std::path::PathBuf;

use super::{ConfigError, DefaultMode, Env, Mode, Secret, ServerLimits, malformed, mode, server_limits};
use crate::domain::authority::TerminalSigner;

/// The signing key variable: a private key file's JSON (`helix solver keygen`).
pub const SIGNING_KEY_VAR: &str = "HELIX_SOLVER_SIGNING_KEY";

pub struct SolverConfig {
    pub mode: Mode,
    /// The token callers must present (`HELIX_ASK_BEARER_TOKEN`, the value the service
    /// sends); required in production. `None` (development only) admits any caller.
    pub bearer: Option<Secret>,
    /// `HELIX_SOLVER_SIGNING_KEY`; required in production, else the caller supplies one.
    pub signer: Option<TerminalSigner>,
    /// `HELIX_SOLVER_CORPUS_DIR`: documents on disk instead of the bundled corpus.
    pub corpus_dir: Option<PathBuf>,
    /// Connection limits of `helix solver serve` (the `HELIX_SERVE_*` of `helix serve`).
    pub server: ServerLimits,
}

impl std::fmt::Debug for SolverConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SolverConfig")
            .field("mode", &self.mode)
            .field("bearer", &self.bearer)
            .field("signer", &self.signer.as_ref().map(|s| (&s.issuer, &s.key_id)))
            .field("corpus_dir", &self.corpus_dir)
            .finish()
    }
}

impl SolverConfig {
    pub fn from_lookup(
        default_mode: DefaultMode,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let env = Env { lookup };
        let mode = mode(&env, default_mode)?;
        let prod = mode == Mode::Production;
        let bearer = env.get("HELIX_ASK_BEARER_TOKEN").map(Secret::new);
        if prod && bearer.is_none() {
            return Err(ConfigError::Missing("HELIX_ASK_BEARER_TOKEN (the solver's caller credential)"));
        }
        if bearer.as_ref().is_some_and(|b| b.expose().len() < 16) {
            return Err(malformed("HELIX_ASK_BEARER_TOKEN", "shorter than 16 characters"));
        }
        let signer = match env.get(SIGNING_KEY_VAR) {
            Some(json) => Some(TerminalSigner::from_private_json(&json).map_err(|p| malformed(SIGNING_KEY_VAR, p))?),
            None if prod => return Err(ConfigError::Missing(SIGNING_KEY_VAR)),
            None => None,
        };
        let corpus_dir = env.get("HELIX_SOLVER_CORPUS_DIR").map(Into::into);
        Ok(Self { mode, bearer, signer, corpus_dir, server: server_limits(&env)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: DefaultMode, vars: &[(&str, &str)]) -> Result<SolverConfig, ConfigError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        SolverConfig::from_lookup(mode, &|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    }

    #[test]
    fn production_needs_a_bearer_and_a_signing_key_and_never_prints_them() {
        let key = TerminalSigner::from_seed("helix-ask", "ask-1", [3; 32]).private_json();
        let bearer = ("HELIX_ASK_BEARER_TOKEN", "solver-caller-credential-0001");
        assert!(
            matches!(cfg(DefaultMode::Production, &[]), Err(ConfigError::Missing(m)) if m.starts_with("HELIX_ASK_BEARER_TOKEN"))
        );
        assert_eq!(cfg(DefaultMode::Production, &[bearer]).unwrap_err(), ConfigError::Missing(SIGNING_KEY_VAR));
        let c = cfg(DefaultMode::Production, &[bearer, (SIGNING_KEY_VAR, &key)]).unwrap();
        assert_eq!(c.signer.as_ref().unwrap().key_id, "ask-1");
        let debug = format!("{c:?}");
        assert!(!debug.contains("solver-caller-credential") && !debug.contains(&key[40..]), "{debug}");
        let bad = cfg(DefaultMode::Production, &[bearer, (SIGNING_KEY_VAR, "{\"issuer\":\"i\"}")]).unwrap_err();
        assert!(bad.to_string().contains(SIGNING_KEY_VAR));
        let short = cfg(DefaultMode::Development, &[("HELIX_ASK_BEARER_TOKEN", "short")]).unwrap_err();
        assert!(short.to_string().contains("HELIX_ASK_BEARER_TOKEN") && !short.to_string().contains("short\""));
        let dev = cfg(DefaultMode::Development, &[("HELIX_SOLVER_CORPUS_DIR", "/docs")]).unwrap();
        assert!(dev.bearer.is_none() && dev.signer.is_none());
        assert_eq!(dev.corpus_dir, Some(PathBuf::from("/docs")));
    }
}
