//! The front door: the hosts and origins admitted, and the proxy that may prove HTTPS
//! (`TRUST_PROXY`).
//! Reads variables only through `Env`; depends on nothing outside `config`.

use super::{ConfigError, Env, malformed};

/// The proxy topology in front of the service (`TRUST_PROXY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustProxy {
    /// No proxy is trusted: nothing can prove HTTPS (development only).
    None,
    /// Requests arrive as API Gateway / function URL events, which accept HTTPS only.
    ApiGateway,
    /// TCP peers in these networks are proxies whose `X-Forwarded-Proto` and
    /// `X-Forwarded-For` are believed.
    Peers(Vec<ipnet::IpNet>),
}

pub(super) fn hosts_and_origins(env: &Env, prod: bool) -> Result<(Vec<String>, Vec<String>), ConfigError> {
    let mut allowed_hosts = env.list("HELIX_AGENT_ALLOWED_HOSTS");
    if allowed_hosts.is_empty() {
        if prod {
            return Err(ConfigError::Missing("HELIX_AGENT_ALLOWED_HOSTS"));
        }
        allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "[::1]".into()];
    }
    Ok((allowed_hosts, env.list("HELIX_AGENT_ALLOWED_ORIGINS")))
}

/// `TRUST_PROXY`: who may tell us the request arrived over HTTPS. `apigateway` (the
/// Lambda event's own front door), or a list of proxy addresses (`loopback`, IPs,
/// CIDRs) whose single `X-Forwarded-Proto` is believed. Required in production, where
/// nothing else can prove HTTPS; hop counts and `true` (trust any sender) are refused.
pub(super) fn trust_proxy(env: &Env, prod: bool) -> Result<TrustProxy, ConfigError> {
    const NAME: &str = "TRUST_PROXY";
    let Some(value) = env.get(NAME) else {
        return if prod { Err(ConfigError::Missing(NAME)) } else { Ok(TrustProxy::None) };
    };
    match value.to_ascii_lowercase().as_str() {
        "none" | "false" if prod => Err(ConfigError::UnsafeProduction(
            "TRUST_PROXY=none: helix does not terminate TLS; name the proxy that does".into(),
        )),
        "none" | "false" => Ok(TrustProxy::None),
        "apigateway" => Ok(TrustProxy::ApiGateway),
        list => {
            let mut nets = vec![];
            for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match item {
                    "loopback" => nets
                        .extend(["127.0.0.0/8", "::1/128"].map(|n| n.parse::<ipnet::IpNet>().expect("loopback net"))),
                    _ => {
                        let net = item
                            .parse::<ipnet::IpNet>()
                            .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                            .map_err(|_| {
                                malformed(NAME, format!("{item:?} is not apigateway, none, loopback, an IP or a CIDR"))
                            })?;
                        if prod && net.prefix_len() == 0 {
                            return Err(ConfigError::UnsafeProduction(format!(
                                "TRUST_PROXY={item} trusts every sender's X-Forwarded-Proto"
                            )));
                        }
                        nets.push(net);
                    }
                }
            }
            if nets.is_empty() {
                return Err(malformed(NAME, "names no proxy"));
            }
            Ok(TrustProxy::Peers(nets))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{PROD, cfg, dev_config, prod_with};
    use crate::config::{ConfigError, DefaultMode, TrustProxy};

    #[test]
    fn trust_proxy_is_required_in_production_and_never_trusts_everyone() {
        let vars: Vec<_> = PROD.iter().copied().filter(|(k, _)| *k != "TRUST_PROXY").collect();
        assert_eq!(cfg(DefaultMode::Production, &vars).unwrap_err(), ConfigError::Missing("TRUST_PROXY"));
        for unsafe_value in ["none", "0.0.0.0/0", "::/0"] {
            assert!(matches!(prod_with(&[("TRUST_PROXY", unsafe_value)]), Err(ConfigError::UnsafeProduction(_))));
        }
        for junk in ["true", "1", "10.0.0.0/33", ",", "loopback, nonsense"] {
            assert!(matches!(prod_with(&[("TRUST_PROXY", junk)]), Err(ConfigError::Malformed { .. })), "{junk}");
        }
        assert_eq!(prod_with(&[]).unwrap().trust_proxy, TrustProxy::ApiGateway);
        let c = prod_with(&[("TRUST_PROXY", "loopback, 10.1.0.0/16,192.0.2.7")]).unwrap();
        let TrustProxy::Peers(nets) = c.trust_proxy else { panic!("peers") };
        assert_eq!(nets.len(), 4);
        assert_eq!(dev_config().trust_proxy, TrustProxy::None);
    }
}
