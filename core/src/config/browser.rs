//! The browser lane (`HELIX_BROWSER_*`): sign-in through OpenID Connect, the
//! development provider, and the `helix_session` cookie's lifetimes.
//! Reads variables only through `Env`; depends on nothing outside `config`.

use std::time::Duration;

use super::oauth::parse_asymmetric;
use super::{ConfigError, Env, Mode, Secret, malformed};

/// The browser lane: sign-in through OpenID Connect and the `helix_session` cookie.
#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The public origin (scheme://host[:port]) every cookie mutation must come from.
    pub public_origin: String,
    /// The OpenID provider people sign in with; None: browser sign-in is off.
    pub oidc: Option<OidcConfig>,
    /// Development only: `helix serve` hosts the development OpenID provider at this issuer.
    pub dev_provider: bool,
    /// The development issuer accepts (and advertises) Client ID Metadata Documents
    /// (`HELIX_DEV_OAUTH_CLIENT_METADATA`, on by default). Off: every client registers.
    pub dev_client_metadata: bool,
    pub session_idle: Duration,
    pub session_absolute: Duration,
    /// `Secure` on cookies (always in production).
    pub secure_cookies: bool,
}

#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// Issuer URL (discovery at `{issuer}/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// Admitted ID-token signature algorithms (JOSE names).
    pub algorithms: Vec<String>,
}

/// Path of the development OpenID provider under the public base URL.
pub const DEV_PROVIDER_PATH: &str = "/dev-oidc";
pub const DEV_PROVIDER_CLIENT_ID: &str = "helix-local-browser";

impl BrowserConfig {
    /// `HELIX_BROWSER_*`: a step of its own, after the public base URL and OAuth settings.
    pub(super) fn from_env(
        env: &Env<'_>,
        mode: Mode,
        public_base_url: &str,
        oauth_issuer: &str,
    ) -> Result<Self, ConfigError> {
        let prod = mode == Mode::Production;
        let public_origin = origin_of(public_base_url)
            .ok_or_else(|| malformed("CASIMIR_PUBLIC_BASE_URL", "must be scheme://host[:port][/path]"))?;
        let dev_provider = match env.get("HELIX_BROWSER_DEV_PROVIDER").as_deref() {
            Some("1") if prod => {
                return Err(ConfigError::UnsafeProduction("HELIX_BROWSER_DEV_PROVIDER is a development path".into()));
            }
            Some("1") => true,
            Some("0") => false,
            None => !prod && env.get("HELIX_BROWSER_OIDC_ISSUER").is_none(),
            Some(_) => return Err(malformed("HELIX_BROWSER_DEV_PROVIDER", "must be 0 or 1")),
        };
        let dev_client_metadata = match env.get("HELIX_DEV_OAUTH_CLIENT_METADATA").as_deref() {
            None | Some("1") => true,
            Some("0") => false,
            Some(_) => return Err(malformed("HELIX_DEV_OAUTH_CLIENT_METADATA", "must be 0 or 1")),
        };
        let issuer = env.get("HELIX_BROWSER_OIDC_ISSUER");
        let client_id = env.get("HELIX_BROWSER_OIDC_CLIENT_ID");
        let client_secret = env.get("HELIX_BROWSER_OIDC_CLIENT_SECRET").map(Secret::new);
        let algorithms = match env.get("HELIX_BROWSER_OIDC_ALGORITHMS") {
            Some(list) => list.split(',').map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()).collect(),
            None => vec!["RS256".to_owned()],
        };
        if let Some(a) = algorithms.iter().find(|a| parse_asymmetric(a).is_none()) {
            return Err(malformed(
                "HELIX_BROWSER_OIDC_ALGORITHMS",
                format!("{a:?} is not an admitted asymmetric algorithm"),
            ));
        }
        let oidc = match (issuer, client_id, dev_provider) {
            (Some(_), _, true) => {
                return Err(malformed("HELIX_BROWSER_OIDC_ISSUER", "set either it or HELIX_BROWSER_DEV_PROVIDER=1"));
            }
            (None, None, true) => Some(OidcConfig {
                // One issuer for people and agents: the development issuer at the base URL.
                issuer: public_base_url.to_owned(),
                client_id: DEV_PROVIDER_CLIENT_ID.into(),
                client_secret: None,
                algorithms,
            }),
            (None, None, false) if client_secret.is_none() => None,
            (Some(issuer), Some(client_id), false) => {
                if prod {
                    if !issuer.starts_with("https://") {
                        return Err(ConfigError::UnsafeProduction("HELIX_BROWSER_OIDC_ISSUER must be https".into()));
                    }
                    // The binding a step-up creates is for the agent issuer: both must be one server.
                    if issuer != oauth_issuer {
                        return Err(ConfigError::UnsafeProduction(
                            "HELIX_BROWSER_OIDC_ISSUER must equal HELIX_AGENT_OAUTH_ISSUER".into(),
                        ));
                    }
                    if client_secret.is_none() {
                        return Err(ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_SECRET"));
                    }
                }
                Some(OidcConfig { issuer, client_id, client_secret, algorithms })
            }
            (None, _, false) => return Err(ConfigError::Missing("HELIX_BROWSER_OIDC_ISSUER")),
            (Some(_), None, false) => return Err(ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_ID")),
            (None, Some(_), true) => {
                return Err(malformed("HELIX_BROWSER_OIDC_CLIENT_ID", "the development provider has its own client"));
            }
        };
        let idle = env.number("HELIX_BROWSER_SESSION_IDLE_SECONDS", 2 * 3600)?.clamp(60, 7 * 24 * 3600);
        let absolute = env.number("HELIX_BROWSER_SESSION_ABSOLUTE_SECONDS", 12 * 3600)?.clamp(idle, 30 * 24 * 3600);
        Ok(BrowserConfig {
            public_origin,
            oidc,
            dev_provider,
            dev_client_metadata,
            session_idle: Duration::from_secs(idle),
            session_absolute: Duration::from_secs(absolute),
            secure_cookies: prod || public_base_url.starts_with("https://"),
        })
    }
}

/// `scheme://host[:port]` of a URL (the Origin a browser sends for it).
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    (matches!(scheme, "http" | "https") && !authority.is_empty() && !authority.contains('@'))
        .then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{PROD, cfg};
    use crate::config::{ConfigError, DefaultMode};

    use super::*;

    const DEV: &[(&str, &str)] =
        &[("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"), ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef")];

    fn with(
        base: &[(&'static str, &'static str)],
        extra: &[(&'static str, &'static str)],
    ) -> Vec<(&'static str, &'static str)> {
        base.iter().chain(extra).copied().collect()
    }

    #[test]
    fn development_hosts_the_dev_provider_at_the_public_base_url() {
        let c = cfg(DefaultMode::Development, DEV).unwrap();
        assert!(c.browser.dev_provider);
        let oidc = c.browser.oidc.unwrap();
        assert_eq!(oidc.issuer, "http://127.0.0.1:9000");
        assert_eq!(oidc.algorithms, vec!["RS256"], "the development provider's ID tokens are RS256");
        assert_eq!(c.browser.public_origin, "http://127.0.0.1:9000");
        assert!(!c.browser.secure_cookies);
        assert!(c.browser.session_idle <= c.browser.session_absolute);
    }

    #[test]
    fn production_without_browser_settings_has_no_sign_in_and_refuses_the_dev_provider() {
        let c = cfg(DefaultMode::Production, PROD).unwrap();
        assert!(c.browser.oidc.is_none() && !c.browser.dev_provider && c.browser.secure_cookies);
        let e = cfg(DefaultMode::Production, &with(PROD, &[("HELIX_BROWSER_DEV_PROVIDER", "1")])).unwrap_err();
        assert!(matches!(e, ConfigError::UnsafeProduction(_)), "{e}");
    }

    #[test]
    fn production_refuses_incomplete_or_unsafe_browser_settings() {
        let issuer = ("HELIX_BROWSER_OIDC_ISSUER", "https://issuer.example.com/");
        let id = ("HELIX_BROWSER_OIDC_CLIENT_ID", "web");
        let secret = ("HELIX_BROWSER_OIDC_CLIENT_SECRET", "0123456789abcdef");
        let e = |extra: &[(&'static str, &'static str)]| cfg(DefaultMode::Production, &with(PROD, extra)).unwrap_err();
        assert_eq!(e(&[issuer]), ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_ID"));
        assert_eq!(e(&[id, secret]), ConfigError::Missing("HELIX_BROWSER_OIDC_ISSUER"));
        assert_eq!(e(&[secret]), ConfigError::Missing("HELIX_BROWSER_OIDC_ISSUER"));
        assert_eq!(e(&[issuer, id]), ConfigError::Missing("HELIX_BROWSER_OIDC_CLIENT_SECRET"));
        assert!(matches!(
            e(&[("HELIX_BROWSER_OIDC_ISSUER", "http://issuer.example.com/"), id, secret]),
            ConfigError::UnsafeProduction(_)
        ));
        assert!(matches!(
            e(&[("HELIX_BROWSER_OIDC_ISSUER", "https://other.example.com/"), id, secret]),
            ConfigError::UnsafeProduction(_)
        ));
        assert!(matches!(
            e(&[issuer, id, secret, ("HELIX_BROWSER_OIDC_ALGORITHMS", "HS256")]),
            ConfigError::Malformed { .. }
        ));
        let c = cfg(DefaultMode::Production, &with(PROD, &[issuer, id, secret])).unwrap();
        let oidc = c.browser.oidc.unwrap();
        assert_eq!((oidc.issuer.as_str(), oidc.algorithms), ("https://issuer.example.com/", vec!["RS256".to_owned()]));
        assert!(!format!("{:?}", oidc.client_secret).contains("0123456789abcdef"), "the secret is redacted");
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert_eq!(origin_of("https://API.example.com/base/path").as_deref(), Some("https://api.example.com"));
        assert_eq!(origin_of("http://127.0.0.1:9000").as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(origin_of("ftp://x"), None);
        assert_eq!(origin_of("https://user@x"), None);
    }
}
