//! The OAuth resource server (`HELIX_AGENT_OAUTH_*`, the local HS256 path) and the
//! public base URL and resource it must agree with.
//! Reads variables only through `Env`; depends on nothing outside `config`.

use jsonwebtoken::Algorithm;

use super::{ConfigError, Env, Secret, malformed};

#[derive(Debug, Clone)]
pub struct OAuthConfig {
    pub issuer: String,
    pub audience: String,
    pub jwks_url: Option<String>,
    pub provider: String,
    pub algorithms: Vec<Algorithm>,
    /// Only outside production, with `HELIX_AGENT_ALLOW_LOCAL_HS256=1`.
    pub local_hs256_secret: Option<Secret>,
    pub authorization_servers: Vec<String>,
    /// The (iss, aud) key-set tokens carry when not `issuer` and `audience`: `helix serve`
    /// on loopback, whose development issuer signs with its base URL and the canonical
    /// resource. Such a token stands for `issuer` (one identity with `helix dev-token`'s
    /// port-independent tokens, the browser sign-in and the account bindings).
    pub jwks_identity: Option<(String, String)>,
}

/// The development defaults of the expected issuer and audience (port-independent, so a
/// `helix dev-token` token works against a server on any port).
pub const LOCAL_ISSUER: &str = "helix-local-issuer";
pub const LOCAL_AUDIENCE: &str = "helix-local-resource";

pub(super) fn public_base_url(env: &Env, prod: bool) -> Result<String, ConfigError> {
    let url = match env.get("CASIMIR_PUBLIC_BASE_URL") {
        Some(u) => u.trim_end_matches('/').to_owned(),
        None if prod => return Err(ConfigError::Missing("CASIMIR_PUBLIC_BASE_URL")),
        None => "http://127.0.0.1:9000".into(),
    };
    if prod && !url.starts_with("https://") {
        return Err(ConfigError::UnsafeProduction("CASIMIR_PUBLIC_BASE_URL must be https".into()));
    }
    Ok(url)
}

/// A variable required in production, with a development default.
fn dev_default(env: &Env, prod: bool, name: &'static str, default: &str) -> Result<String, ConfigError> {
    match env.get(name) {
        Some(v) => Ok(v),
        None if prod => Err(ConfigError::Missing(name)),
        None => Ok(default.to_owned()),
    }
}

pub(super) fn algorithms(env: &Env) -> Result<Vec<Algorithm>, ConfigError> {
    match env.get("HELIX_AGENT_OAUTH_ALGORITHMS") {
        None => Ok(vec![Algorithm::RS256]),
        Some(list) => list
            .split(',')
            .map(|a| {
                parse_asymmetric(a.trim()).ok_or_else(|| {
                    malformed("HELIX_AGENT_OAUTH_ALGORITHMS", format!("{a:?} is not an admitted asymmetric algorithm"))
                })
            })
            .collect(),
    }
}

pub(super) fn oauth(
    env: &Env,
    prod: bool,
    local_hs256_secret: Option<Secret>,
    algorithms: Vec<Algorithm>,
) -> Result<OAuthConfig, ConfigError> {
    let issuer = dev_default(env, prod, "HELIX_AGENT_OAUTH_ISSUER", LOCAL_ISSUER)?;
    let audience = dev_default(env, prod, "HELIX_AGENT_OAUTH_AUDIENCE", LOCAL_AUDIENCE)?;
    let provider = dev_default(env, prod, "HELIX_AGENT_OAUTH_PROVIDER", "helix-local")?;
    let jwks_url = env.get("HELIX_AGENT_OAUTH_JWKS_URL");
    if prod {
        let url = jwks_url.as_deref().ok_or(ConfigError::Missing("HELIX_AGENT_OAUTH_JWKS_URL"))?;
        if !url.starts_with("https://") {
            return Err(ConfigError::UnsafeProduction("HELIX_AGENT_OAUTH_JWKS_URL must be https".into()));
        }
    } else if jwks_url.is_none() && local_hs256_secret.is_none() {
        return Err(ConfigError::Missing("HELIX_AGENT_OAUTH_JWKS_URL (or the local HS256 path)"));
    }
    let mut authorization_servers = env.list("HELIX_AGENT_OAUTH_AUTHORIZATION_SERVERS");
    if authorization_servers.is_empty() {
        authorization_servers.push(issuer.clone());
    }
    Ok(OAuthConfig {
        issuer,
        audience,
        jwks_url,
        provider,
        algorithms,
        local_hs256_secret,
        authorization_servers,
        jwks_identity: None,
    })
}

pub(super) fn local_hs256(env: &Env, prod: bool) -> Result<Option<Secret>, ConfigError> {
    if env.get("HELIX_AGENT_ALLOW_LOCAL_HS256").as_deref() != Some("1") {
        return Ok(None);
    }
    if prod {
        return Err(ConfigError::UnsafeProduction("HELIX_AGENT_ALLOW_LOCAL_HS256 is a nonproduction test path".into()));
    }
    let secret = env.required("HELIX_AGENT_LOCAL_JWT_SECRET")?;
    if secret.chars().count() < 32 {
        return Err(malformed("HELIX_AGENT_LOCAL_JWT_SECRET", "must be at least 32 characters"));
    }
    Ok(Some(Secret::new(secret)))
}

/// The protected resource is the configured audience, published as the metadata's
/// `resource`. It agrees with the public base URL when it is an absolute URL on the
/// same origin (scheme, host, port), with no userinfo, query or fragment; otherwise the
/// process refuses to start. Only the development default audience
/// (`helix-local-resource`, kept port-independent so `helix dev-token` tokens work against
/// a server on any port) names no URL: the resource is then `{public base URL}/mcp`.
pub(super) fn resource(env: &Env, base: &str, audience: &str) -> Result<String, ConfigError> {
    if env.get("HELIX_AGENT_OAUTH_AUDIENCE").is_none() {
        return Ok(format!("{base}/mcp"));
    }
    let disagree = |why: &str| {
        ConfigError::Inconsistent(format!(
            "HELIX_AGENT_OAUTH_AUDIENCE {why}; the metadata's resource is the audience, so it must be a URL on \
             CASIMIR_PUBLIC_BASE_URL's origin"
        ))
    };
    let base = reqwest::Url::parse(base).map_err(|_| malformed("CASIMIR_PUBLIC_BASE_URL", "not an absolute URL"))?;
    let aud = reqwest::Url::parse(audience).map_err(|_| disagree("is not an absolute URL"))?;
    if !matches!(aud.scheme(), "https" | "http") {
        return Err(disagree("is not an http(s) URL"));
    }
    if !aud.username().is_empty() || aud.password().is_some() || aud.query().is_some() || aud.fragment().is_some() {
        return Err(disagree("carries userinfo, a query or a fragment"));
    }
    if aud.origin() != base.origin() {
        return Err(disagree("is on another origin than CASIMIR_PUBLIC_BASE_URL"));
    }
    Ok(audience.to_owned())
}

/// The MCP URL the agent-access page gives clients (`HELIX_AGENT_MCP_URL`): by default
/// the resource. Set where the MCP function is its own public origin (its function URL):
/// then an absolute URL whose path is exactly `/mcp`, https in production, with no
/// userinfo, query or fragment, naming that function's resource.
pub(super) fn mcp_url(env: &Env, prod: bool, resource: &str) -> Result<String, ConfigError> {
    const NAME: &str = "HELIX_AGENT_MCP_URL";
    let Some(value) = env.get(NAME) else { return Ok(resource.to_owned()) };
    let url = reqwest::Url::parse(&value).map_err(|_| malformed(NAME, "not an absolute URL"))?;
    let https = url.scheme() == "https" || (!prod && url.scheme() == "http");
    if !https || url.path() != "/mcp" || !url.username().is_empty() || url.password().is_some() {
        return Err(malformed(NAME, "must be an https URL whose path is /mcp"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(malformed(NAME, "carries a query or a fragment"));
    }
    Ok(value)
}

pub(super) fn parse_asymmetric(name: &str) -> Option<Algorithm> {
    use Algorithm::*;
    Some(match name {
        "RS256" => RS256,
        "RS384" => RS384,
        "RS512" => RS512,
        "PS256" => PS256,
        "PS384" => PS384,
        "PS512" => PS512,
        "ES256" => ES256,
        "ES384" => ES384,
        "EdDSA" => EdDSA,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{PROD, cfg, prod_with};
    use crate::config::{ConfigError, DefaultMode};

    #[test]
    fn production_refuses_an_audience_on_another_origin_than_the_public_base_url() {
        for audience in [
            "https://other.example.com/mcp",
            "http://api.example.com/mcp",
            "https://api.example.com:8443/mcp",
            "api.example.com/mcp",
            "https://api.example.com/mcp?x=1",
            "https://user@api.example.com/mcp",
            "helix-local-resource",
        ] {
            assert!(
                matches!(prod_with(&[("HELIX_AGENT_OAUTH_AUDIENCE", audience)]), Err(ConfigError::Inconsistent(_))),
                "{audience}"
            );
        }
        for audience in ["https://api.example.com/mcp", "https://API.example.com:443/", "https://api.example.com"] {
            assert_eq!(prod_with(&[("HELIX_AGENT_OAUTH_AUDIENCE", audience)]).unwrap().resource, audience);
        }
    }

    #[test]
    fn a_configured_development_audience_must_agree_too() {
        let base = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
            ("CASIMIR_PUBLIC_BASE_URL", "http://127.0.0.1:9000"),
        ];
        let mut vars = base.to_vec();
        vars.push(("HELIX_AGENT_OAUTH_AUDIENCE", "http://localhost:9000/mcp"));
        assert!(matches!(cfg(DefaultMode::Development, &vars), Err(ConfigError::Inconsistent(_))));
        vars.pop();
        vars.push(("HELIX_AGENT_OAUTH_AUDIENCE", "http://127.0.0.1:9000/mcp"));
        assert!(cfg(DefaultMode::Development, &vars).is_ok());
        let default = cfg(DefaultMode::Development, &base).unwrap();
        assert_eq!(default.oauth.audience, "helix-local-resource");
        assert_eq!(default.resource, "http://127.0.0.1:9000/mcp", "the development default names no URL");
        assert_eq!(cfg(DefaultMode::Development, &vars).unwrap().resource, "http://127.0.0.1:9000/mcp");
    }

    #[test]
    fn the_mcp_url_defaults_to_the_resource_and_else_names_an_https_mcp_path() {
        assert_eq!(prod_with(&[]).unwrap().mcp_url, "https://api.example.com/mcp");
        let fn_url = "https://abc123.lambda-url.us-east-1.on.aws/mcp";
        assert_eq!(prod_with(&[("HELIX_AGENT_MCP_URL", fn_url)]).unwrap().mcp_url, fn_url);
        for bad in [
            "http://abc123.lambda-url.us-east-1.on.aws/mcp",
            "https://abc123.lambda-url.us-east-1.on.aws/",
            "https://abc123.lambda-url.us-east-1.on.aws/mcp?x=1",
            "https://u@abc123.lambda-url.us-east-1.on.aws/mcp",
            "abc123/mcp",
        ] {
            assert!(matches!(prod_with(&[("HELIX_AGENT_MCP_URL", bad)]), Err(ConfigError::Malformed { .. })), "{bad}");
        }
    }

    #[test]
    fn production_refuses_each_missing_oauth_variable() {
        for skip in [
            "HELIX_AGENT_OAUTH_ISSUER",
            "HELIX_AGENT_OAUTH_AUDIENCE",
            "HELIX_AGENT_OAUTH_JWKS_URL",
            "HELIX_AGENT_OAUTH_PROVIDER",
            "CASIMIR_PUBLIC_BASE_URL",
            "HELIX_AGENT_ALLOWED_HOSTS",
        ] {
            let vars: Vec<_> = PROD.iter().copied().filter(|(k, _)| *k != skip).collect();
            assert_eq!(cfg(DefaultMode::Production, &vars).unwrap_err(), ConfigError::Missing(skip), "{skip}");
        }
    }

    #[test]
    fn production_refuses_hs256_symmetric_algorithms_and_http() {
        let mut vars = PROD.to_vec();
        vars.push(("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"));
        vars.push(("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"));
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::UnsafeProduction(_))));
        let mut vars = PROD.to_vec();
        vars.push(("HELIX_AGENT_OAUTH_ALGORITHMS", "RS256,HS256"));
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::Malformed { .. })));
        let mut vars = PROD.to_vec();
        vars[0] = ("CASIMIR_PUBLIC_BASE_URL", "http://api.example.com");
        assert!(matches!(cfg(DefaultMode::Production, &vars), Err(ConfigError::UnsafeProduction(_))));
    }

    #[test]
    fn local_hs256_needs_a_32_character_secret() {
        let short = [("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"), ("HELIX_AGENT_LOCAL_JWT_SECRET", "short")];
        assert!(matches!(
            cfg(DefaultMode::Development, &short),
            Err(ConfigError::Malformed { name: "HELIX_AGENT_LOCAL_JWT_SECRET", .. })
        ));
        let ok = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
        ];
        let c = cfg(DefaultMode::Development, &ok).unwrap();
        assert!(c.oauth.local_hs256_secret.is_some());
        assert!(!format!("{:?}", c).contains("0123456789abcdef"), "secrets never appear in Debug");
    }
}
