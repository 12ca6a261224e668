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
    /// Exactly this many proxies stand in front, each appending to `X-Forwarded-For` (and
    /// `X-Forwarded-Proto`): the client is the N-th entry from the right; a header with
    /// fewer entries proves nothing.
    Hops(u8),
}

/// The most proxy hops `TRUST_PROXY=hops:N` may name.
pub const MAX_TRUSTED_HOPS: u8 = 16;

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
/// Lambda event's own front door), a list of proxy addresses (`loopback`, IPs, CIDRs)
/// whose single `X-Forwarded-Proto` is believed, or `hops:N`, an exact count of proxies
/// (1-16) in front. Required in production, where nothing else can prove HTTPS; `true`,
/// `*`, `all` and bare numbers (trust any sender, or a count without its unit) are refused.
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
        "true" | "*" | "all" => Err(malformed(
            NAME,
            "trusting every sender's forwarded headers is never allowed; name the proxies or their hop count (hops:N)",
        )),
        hops if hops.starts_with("hops:") => match hops["hops:".len()..].trim().parse::<u8>() {
            Ok(n) if (1..=MAX_TRUSTED_HOPS).contains(&n) => Ok(TrustProxy::Hops(n)),
            _ => Err(malformed(NAME, format!("hops:N needs N from 1 to {MAX_TRUSTED_HOPS}"))),
        },
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
                                malformed(
                                    NAME,
                                    format!("{item:?} is not apigateway, none, hops:N, loopback, an IP or a CIDR"),
                                )
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
            assert!(
                matches!(prod_with(&[("TRUST_PROXY", unsafe_value)]), Err(ConfigError::UnsafeProduction(_))),
                "{unsafe_value}"
            );
        }
        for junk in ["true", "TRUE", "*", "all", "1", "10.0.0.0/33", ",", "loopback, nonsense"] {
            assert!(matches!(prod_with(&[("TRUST_PROXY", junk)]), Err(ConfigError::Malformed { .. })), "{junk}");
        }
        assert_eq!(prod_with(&[]).unwrap().trust_proxy, TrustProxy::ApiGateway);
        let c = prod_with(&[("TRUST_PROXY", "loopback, 10.1.0.0/16,192.0.2.7")]).unwrap();
        let TrustProxy::Peers(nets) = c.trust_proxy else { panic!("peers") };
        assert_eq!(nets.len(), 4);
        assert_eq!(dev_config().trust_proxy, TrustProxy::None);
    }

    #[test]
    fn trust_proxy_takes_an_exact_hop_count_from_one_to_sixteen() {
        for (value, hops) in [("hops:1", 1), ("HOPS:2", 2), ("hops: 16", 16)] {
            assert_eq!(prod_with(&[("TRUST_PROXY", value)]).unwrap().trust_proxy, TrustProxy::Hops(hops), "{value}");
        }
        for junk in ["hops:0", "hops:17", "hops:", "hops:-1", "hops:1.5", "hops:1,loopback", "2"] {
            assert!(matches!(prod_with(&[("TRUST_PROXY", junk)]), Err(ConfigError::Malformed { .. })), "{junk}");
        }
        // Development refuses trust-everyone too: it is never a safe setting.
        let dev = [
            ("HELIX_AGENT_ALLOW_LOCAL_HS256", "1"),
            ("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
            ("TRUST_PROXY", "all"),
        ];
        assert!(matches!(cfg(DefaultMode::Development, &dev), Err(ConfigError::Malformed { .. })));
    }
}
