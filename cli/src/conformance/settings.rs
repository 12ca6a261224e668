//! What the probe is pointed at, read from the environment only (never from flags, so a
//! credential never lands in shell history or a process listing), and the transport rule:
//! https, or plain http only to a loopback IP literal and only with the explicit opt-in.

use reqwest::Url;

pub const BASE_URL: &str = "CASIMIRBOT_MCP_PUBLIC_BASE_URL";
pub const ALLOW_LOOPBACK_HTTP: &str = "CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP";
pub const ACCESS_TOKEN: &str = "CASIMIRBOT_MCP_ACCESS_TOKEN";
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
pub const OPENAI_MODEL: &str = "OPENAI_MODEL";
pub const OPENAI_BASE_URL: &str = "CASIMIRBOT_MCP_CONFORMANCE_OPENAI_BASE_URL";
pub const GEMINI_API_KEY: &str = "GEMINI_API_KEY";
pub const GEMINI_MODEL: &str = "GEMINI_MODEL";
pub const GEMINI_BASE_URL: &str = "CASIMIRBOT_MCP_CONFORMANCE_GEMINI_BASE_URL";

pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com";
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1-mini";
pub const DEFAULT_GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com";
pub const DEFAULT_GEMINI_MODEL: &str = "gemini-2.5-flash";

/// A provider the probe may call: where, with which key and model.
#[derive(Debug, Clone)]
pub struct Provider {
    pub base: String,
    pub api_key: String,
    pub model: String,
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The target's base URL without a trailing slash (e.g. `https://casimirbot.com`).
    pub base: String,
    pub access_token: Option<String>,
    /// `Err` names why the configured provider endpoint was refused (checked as a failure).
    pub openai: Option<Result<Provider, String>>,
    pub gemini: Option<Result<Provider, String>>,
}

impl Settings {
    /// Every configured credential value, for redaction.
    pub fn secrets(lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        [ACCESS_TOKEN, OPENAI_API_KEY, GEMINI_API_KEY].iter().filter_map(|n| non_empty(lookup, n)).collect()
    }

    /// The settings, or why the target is refused (no request may be sent then).
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let allow_http = non_empty(lookup, ALLOW_LOOPBACK_HTTP).as_deref() == Some("1");
        let raw = non_empty(lookup, BASE_URL).ok_or_else(|| format!("{BASE_URL} is required"))?;
        let base = admitted_base(&raw, allow_http, BASE_URL)?;
        let provider = |key: &str, model: &str, model_default: &str, base_env: &str, base_default: &str| {
            let api_key = non_empty(lookup, key)?;
            let model = non_empty(lookup, model).unwrap_or_else(|| model_default.to_owned());
            let base = non_empty(lookup, base_env).unwrap_or_else(|| base_default.to_owned());
            Some(
                admitted_base(&base, allow_http, base_env)
                    .and_then(|base| valid_model(&model).map(|_| Provider { base, api_key, model })),
            )
        };
        Ok(Settings {
            base,
            access_token: non_empty(lookup, ACCESS_TOKEN),
            openai: provider(
                OPENAI_API_KEY,
                OPENAI_MODEL,
                DEFAULT_OPENAI_MODEL,
                OPENAI_BASE_URL,
                DEFAULT_OPENAI_BASE_URL,
            ),
            gemini: provider(
                GEMINI_API_KEY,
                GEMINI_MODEL,
                DEFAULT_GEMINI_MODEL,
                GEMINI_BASE_URL,
                DEFAULT_GEMINI_BASE_URL,
            ),
        })
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.base)
    }
}

fn non_empty(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// An origin the probe may talk to: https anywhere; http only to a loopback IP literal
/// with the opt-in. No credentials, query or fragment in the URL, no path beyond `/`.
pub fn admitted_base(raw: &str, allow_loopback_http: bool, name: &str) -> Result<String, String> {
    let url = Url::parse(raw).map_err(|_| format!("{name} is not an absolute URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{name} must not carry credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() || !matches!(url.path(), "" | "/") {
        return Err(format!("{name} must be an origin (no path, query or fragment)"));
    }
    match url.scheme() {
        "https" => {}
        "http" if !is_loopback_literal(&url) => {
            return Err(format!("{name}: plain http is refused for a non-loopback host; use https"));
        }
        "http" if !allow_loopback_http => {
            return Err(format!("{name}: plain http to loopback needs {ALLOW_LOOPBACK_HTTP}=1"));
        }
        "http" => {}
        _ => return Err(format!("{name} must use https")),
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// A loopback IP literal (127.0.0.0/8, ::1). A name such as `localhost` is refused: what it
/// resolves to is not the probe's to promise.
fn is_loopback_literal(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    literal.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn valid_model(model: &str) -> Result<(), String> {
    let ok = !model.is_empty()
        && model.len() <= 100
        && model.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok { Ok(()) } else { Err("the model name must be 1-100 characters of A-Z a-z 0-9 . - _".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_lookup(&move |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    }

    #[test]
    fn https_is_admitted_and_normalised() {
        let s = settings(&[(BASE_URL, "https://casimirbot.com/")]).unwrap();
        assert_eq!(s.base, "https://casimirbot.com");
        assert_eq!(s.mcp_url(), "https://casimirbot.com/mcp");
        assert!(s.openai.is_none() && s.gemini.is_none() && s.access_token.is_none());
    }

    #[test]
    fn plain_http_needs_a_loopback_literal_and_the_opt_in() {
        let opt_in = (ALLOW_LOOPBACK_HTTP, "1");
        assert!(settings(&[(BASE_URL, "http://127.0.0.1:1522"), opt_in]).is_ok());
        assert!(settings(&[(BASE_URL, "http://[::1]:1522"), opt_in]).is_ok());
        for refused in ["http://example.com", "http://localhost:1522", "http://10.0.0.1", "http://127.0.0.1.nip.io"] {
            let err = settings(&[(BASE_URL, refused), opt_in]).unwrap_err();
            assert!(err.contains("non-loopback"), "{refused}: {err}");
        }
        let err = settings(&[(BASE_URL, "http://127.0.0.1:1522")]).unwrap_err();
        assert!(err.contains(ALLOW_LOOPBACK_HTTP), "{err}");
        assert!(settings(&[(BASE_URL, "http://127.0.0.1:1522"), (ALLOW_LOOPBACK_HTTP, "true")]).is_err());
    }

    #[test]
    fn odd_targets_are_refused() {
        for refused in
            ["", "casimirbot.com", "ftp://x", "https://u:p@x", "https://x/mcp", "https://x/?a=1", "https://x/#f"]
        {
            assert!(settings(&[(BASE_URL, refused)]).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_provider_endpoint_follows_the_same_transport_rule() {
        let s = settings(&[
            (BASE_URL, "https://x"),
            (OPENAI_API_KEY, "sk"),
            (OPENAI_BASE_URL, "http://example.com"),
            (GEMINI_API_KEY, "g"),
        ])
        .unwrap();
        assert!(s.openai.unwrap().is_err());
        let gemini = s.gemini.unwrap().unwrap();
        assert_eq!((gemini.base.as_str(), gemini.model.as_str()), (DEFAULT_GEMINI_BASE_URL, DEFAULT_GEMINI_MODEL));
        let bad_model = settings(&[(BASE_URL, "https://x"), (GEMINI_API_KEY, "g"), (GEMINI_MODEL, "../x")]).unwrap();
        assert!(bad_model.gemini.unwrap().is_err());
    }
}
