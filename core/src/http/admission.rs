//! Pre-auth admission of a request's head: the authority it is addressed to (`Host` or
//! the HTTP/2 `:authority`), security headers that must appear once, the scheme proven
//! by a trusted proxy (`TRUST_PROXY`), the caller's address, origin, declared body size.
//! Pure functions over the request head, no I/O; nothing here may panic on any input
//! (fuzzed in the tests below). Depends on config and error only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::header::{CONTENT_LENGTH, HOST, ORIGIN};
use http::{HeaderMap, Uri};

use crate::config::{Config, Limits, Mode, TrustProxy};
use crate::error::ApiError;

/// Headers whose first value would otherwise win silently: two values are refused.
pub const SINGLE_VALUED: [&str; 7] =
    ["host", "authorization", "x-tenant-id", "x-customer-id", "x-org-id", "idempotency-key", "origin"];

/// How a request reached this process, set by the transport before the pipeline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// An API Gateway (REST or HTTP API) or Lambda function URL event: HTTPS-only front doors.
    ApiGateway,
    /// A TCP connection accepted by `helix serve` from `peer`.
    Socket { peer: IpAddr },
}

/// The host a request is addressed to: lowercased, IPv6 literals in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHost {
    pub host: String,
    pub port: Option<u16>,
}

impl RequestHost {
    /// Parses an `authority` (`host[:port]`) strictly: a reg-name, an IPv4 address or a
    /// bracketed IPv6 address, then optionally `:` and a decimal port. No userinfo.
    pub fn parse(raw: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(raw).ok()?;
        // The http crate's parser first (it rejects what a URI authority cannot hold),
        // then the stricter shape a Host may have (RFC 9110 7.2: uri-host [":" port]).
        let authority = http::uri::Authority::try_from(text).ok()?;
        if authority.as_str() != text || text.contains('@') {
            return None;
        }
        let (host, port) = match text.strip_prefix('[') {
            Some(rest) => {
                let (inner, after) = rest.split_once(']')?;
                inner.parse::<Ipv6Addr>().ok()?;
                (&text[..inner.len() + 2], after)
            }
            None => match text.split_once(':') {
                Some((h, _)) => (h, &text[h.len()..]),
                None => (text, ""),
            },
        };
        let port = match port {
            "" => None,
            p => {
                let digits = p.strip_prefix(':')?;
                if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some(digits.parse::<u16>().ok()?)
            }
        };
        if !host.starts_with('[') && !is_reg_name(host) {
            return None;
        }
        Some(RequestHost { host: host.to_ascii_lowercase(), port })
    }

    fn ip(&self) -> Option<IpAddr> {
        match self.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
            None => self.host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
        }
    }

    pub fn is_loopback(&self) -> bool {
        match self.ip() {
            Some(IpAddr::V4(v4)) => v4.is_loopback(),
            Some(IpAddr::V6(v6)) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
            None => self.host == "localhost" || self.host.ends_with(".localhost"),
        }
    }

    /// An allowlist entry names a host (any port) or `host:port` (that port only).
    pub fn allowed_by(&self, entry: &str) -> bool {
        match RequestHost::parse(entry.trim().as_bytes()) {
            Some(allowed) => allowed.host == self.host && allowed.port.is_none_or(|p| Some(p) == self.port),
            None => false,
        }
    }
}

/// DNS names and IPv4 literals: labels of letters, digits, `-`, `_` (one trailing dot).
fn is_reg_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Refuses a second value of any header in [`SINGLE_VALUED`].
pub fn single_valued(headers: &HeaderMap) -> Result<(), ApiError> {
    for name in SINGLE_VALUED {
        if headers.get_all(name).iter().nth(1).is_some() {
            return Err(ApiError::DuplicateHeader { name });
        }
    }
    Ok(())
}

/// The authority a request is addressed to, under HTTP/1 (`Host`, or an absolute-form
/// target) and HTTP/2 (`:authority`, which hyper places in the URI). When both are
/// present they must agree (RFC 9113 8.3.1); a malformed value is refused.
pub fn request_host(uri: &Uri, headers: &HeaderMap) -> Result<RequestHost, ApiError> {
    let header = match headers.get(HOST) {
        Some(v) => Some(RequestHost::parse(v.as_bytes()).ok_or(ApiError::HostNotAllowed)?),
        None => None,
    };
    let target = match uri.authority() {
        Some(a) => Some(RequestHost::parse(a.as_str().as_bytes()).ok_or(ApiError::HostNotAllowed)?),
        None => None,
    };
    match (target, header) {
        (Some(t), Some(h)) if t != h => Err(ApiError::HostNotAllowed),
        (Some(a), _) | (None, Some(a)) => Ok(a),
        (None, None) => Err(ApiError::HostNotAllowed),
    }
}

/// Whether the request provably reached the public origin over HTTPS. `helix` never
/// terminates TLS itself, so this is only ever the word of a proxy that `TRUST_PROXY`
/// names; a missing or repeated `X-Forwarded-Proto` proves nothing.
pub fn proven_https(trust: &TrustProxy, transport: Option<Transport>, headers: &HeaderMap) -> bool {
    match (trust, transport) {
        // API Gateway and function URLs accept HTTPS only; the event says where it came from.
        (TrustProxy::ApiGateway, Some(Transport::ApiGateway)) => true,
        (TrustProxy::Hops(n), Some(Transport::Socket { .. })) => {
            nth_from_right(headers, "x-forwarded-proto", *n).is_some_and(|p| p.eq_ignore_ascii_case("https"))
        }
        (TrustProxy::Peers(peers), Some(Transport::Socket { peer })) if trusted(peers, peer) => {
            let mut values = headers.get_all("x-forwarded-proto").iter();
            match (values.next(), values.next()) {
                (Some(v), None) => v.to_str().is_ok_and(|p| p.trim().eq_ignore_ascii_case("https")),
                _ => false,
            }
        }
        _ => false,
    }
}

/// With exactly `n` proxies in front, each appending one entry: the `n`-th entry from
/// the right of all the header's lines, comma-separated. Fewer entries (or a value that is
/// not text) prove nothing.
fn nth_from_right<'h>(headers: &'h HeaderMap, name: &str, n: u8) -> Option<&'h str> {
    let mut entries = vec![];
    for value in headers.get_all(name) {
        entries.extend(value.to_str().ok()?.split(',').map(str::trim));
    }
    entries.len().checked_sub(n as usize).map(|i| entries[i])
}

fn trusted(peers: &[ipnet::IpNet], ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    peers.iter().any(|net| net.contains(&ip))
}

/// The caller's address for rate limits: the socket peer, unless that peer is a trusted
/// proxy, in which case the rightmost `X-Forwarded-For` address that is not itself a
/// trusted proxy (the one the nearest untrusted hop connected from). With `hops:N`, the
/// N-th entry from the right, or the peer when there are fewer entries or it is no address.
pub fn client_ip(trust: &TrustProxy, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
    if let TrustProxy::Hops(n) = trust {
        return nth_from_right(headers, "x-forwarded-for", *n).and_then(|ip| ip.parse().ok()).unwrap_or(peer);
    }
    let TrustProxy::Peers(peers) = trust else { return peer };
    if !trusted(peers, peer) {
        return peer;
    }
    let mut chain: Vec<&str> = vec![];
    for value in headers.get_all("x-forwarded-for") {
        let Ok(v) = value.to_str() else { return peer };
        chain.extend(v.split(',').map(str::trim));
    }
    let mut client = peer;
    for hop in chain.iter().rev() {
        match hop.parse::<IpAddr>() {
            Ok(ip) if trusted(peers, ip) => client = ip,
            Ok(ip) => return ip,
            Err(_) => return client,
        }
    }
    client
}

/// Admission of the request head before anything is parsed or authenticated: repeated
/// security headers, host, forwarded HTTPS (production), origin, declared body size.
/// The pre-auth rate limit is the caller's next step (one call, see `http::admit`).
pub fn admit_head(
    config: &Config,
    limits: Limits,
    uri: &Uri,
    headers: &HeaderMap,
    transport: Option<Transport>,
) -> Result<(), ApiError> {
    single_valued(headers)?;
    let host = request_host(uri, headers)?;
    let allowed = config.allowed_hosts.iter().any(|a| host.allowed_by(a));
    if !allowed || (config.mode == Mode::Production && host.is_loopback()) {
        return Err(ApiError::HostNotAllowed);
    }
    if config.mode == Mode::Production && !proven_https(&config.trust_proxy, transport, headers) {
        return Err(ApiError::HttpsRequired);
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().map_err(|_| ApiError::OriginNotAllowed)?;
        let loopback_dev = config.mode == Mode::Development
            && ["http://127.0.0.1", "http://localhost"]
                .iter()
                .any(|p| origin == *p || origin.strip_prefix(p).is_some_and(|rest| rest.starts_with(':')));
        if !loopback_dev && !config.allowed_origins.iter().any(|o| o == origin) {
            return Err(ApiError::OriginNotAllowed);
        }
    }
    let mut lengths = headers.get_all(CONTENT_LENGTH).iter();
    if let Some(declared) = lengths.next() {
        // hyper refuses conflicting lengths itself; a Lambda event could still carry junk.
        let n = declared.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok());
        match n {
            None => return Err(ApiError::InvalidRequest("Content-Length is malformed".into())),
            Some(n) if n > limits.body_bytes as u64 => {
                return Err(ApiError::PayloadTooLarge { limit: limits.body_bytes });
            }
            Some(_) => {}
        }
        if lengths.next().is_some() {
            return Err(ApiError::DuplicateHeader { name: "content-length" });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn host(s: &str) -> Option<RequestHost> {
        RequestHost::parse(s.as_bytes())
    }

    #[test]
    fn malformed_hosts_are_refused() {
        for bad in [
            "[::1",
            "[",
            "[:",
            "[::1]junk",
            "127.0.0.1:notaport",
            "127.0.0.1:",
            "127.0.0.1:65536",
            "user@host",
            "",
            "a b",
            "host:80:80",
            "[zz]",
            "ex ample.com",
            "host/path",
            ":80",
        ] {
            assert_eq!(host(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn well_formed_hosts_parse_with_their_port() {
        assert_eq!(host("API.Example.com"), Some(RequestHost { host: "api.example.com".into(), port: None }));
        assert_eq!(host("127.0.0.1:9000"), Some(RequestHost { host: "127.0.0.1".into(), port: Some(9000) }));
        assert_eq!(host("[::1]:80"), Some(RequestHost { host: "[::1]".into(), port: Some(80) }));
        assert!(host("[::1]").unwrap().is_loopback());
        assert!(host("127.8.0.1").unwrap().is_loopback());
        assert!(host("[::ffff:127.0.0.1]").unwrap().is_loopback());
        assert!(!host("api.example.com").unwrap().is_loopback());
        assert!(host("api.example.com:443").unwrap().allowed_by("api.example.com"));
        assert!(host("api.example.com:443").unwrap().allowed_by("API.example.com:443"));
        assert!(!host("api.example.com:8443").unwrap().allowed_by("api.example.com:443"));
        assert!(host("[::1]:9000").unwrap().allowed_by("[::1]"));
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_authority_comes_from_the_uri_or_host_and_both_must_agree() {
        let h2: Uri = "http://127.0.0.1:9000/mcp".parse().unwrap();
        let origin_form: Uri = "/mcp".parse().unwrap();
        assert_eq!(request_host(&h2, &HeaderMap::new()).unwrap().host, "127.0.0.1");
        assert_eq!(request_host(&origin_form, &headers(&[("host", "localhost")])).unwrap().host, "localhost");
        assert!(request_host(&h2, &headers(&[("host", "evil.example")])).is_err());
        assert!(request_host(&origin_form, &HeaderMap::new()).is_err());
    }

    #[test]
    fn each_security_header_may_appear_once() {
        for name in SINGLE_VALUED {
            let h = headers(&[(name, "a"), (name, "b")]);
            assert!(matches!(single_valued(&h), Err(ApiError::DuplicateHeader { name: n }) if n == name));
        }
        assert!(single_valued(&headers(&[("accept", "a"), ("accept", "b")])).is_ok());
    }

    #[test]
    fn https_is_proven_only_by_a_trusted_proxy() {
        let lb: IpAddr = "10.0.0.5".parse().unwrap();
        let peers = TrustProxy::Peers(vec!["10.0.0.0/8".parse().unwrap()]);
        let sock = Some(Transport::Socket { peer: lb });
        let https = headers(&[("x-forwarded-proto", "https")]);
        assert!(proven_https(&peers, sock, &https));
        assert!(!proven_https(&peers, sock, &HeaderMap::new()), "a missing header is not HTTPS");
        assert!(!proven_https(&peers, sock, &headers(&[("x-forwarded-proto", "http")])));
        assert!(!proven_https(&peers, sock, &headers(&[("x-forwarded-proto", "https, http")])));
        assert!(!proven_https(
            &peers,
            sock,
            &headers(&[("x-forwarded-proto", "https"), ("x-forwarded-proto", "https")])
        ));
        let stranger = Some(Transport::Socket { peer: "192.0.2.1".parse().unwrap() });
        assert!(!proven_https(&peers, stranger, &https), "an untrusted peer's header is ignored");
        assert!(!proven_https(&peers, Some(Transport::ApiGateway), &https));
        assert!(proven_https(&TrustProxy::ApiGateway, Some(Transport::ApiGateway), &HeaderMap::new()));
        assert!(!proven_https(&TrustProxy::ApiGateway, sock, &https));
        assert!(!proven_https(&TrustProxy::None, sock, &https));
        assert!(!proven_https(&TrustProxy::ApiGateway, None, &https));
    }

    #[test]
    fn the_client_ip_behind_a_trusted_proxy_is_the_nearest_untrusted_hop() {
        let peers = TrustProxy::Peers(vec!["10.0.0.0/8".parse().unwrap()]);
        let lb: IpAddr = "10.0.0.5".parse().unwrap();
        let h = headers(&[("x-forwarded-for", "203.0.113.9, 198.51.100.7, 10.0.0.9")]);
        assert_eq!(client_ip(&peers, lb, &h), "198.51.100.7".parse::<IpAddr>().unwrap());
        assert_eq!(client_ip(&peers, lb, &HeaderMap::new()), lb);
        let stranger: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(client_ip(&peers, stranger, &h), stranger, "an untrusted peer cannot pick its address");
        assert_eq!(client_ip(&TrustProxy::None, lb, &h), lb);
    }

    #[test]
    fn with_n_hops_the_nth_entry_from_the_right_is_believed_and_fewer_prove_nothing() {
        let peer: IpAddr = "10.0.0.5".parse().unwrap();
        let sock = Some(Transport::Socket { peer });
        let h = headers(&[
            ("x-forwarded-for", "203.0.113.9, 198.51.100.7"),
            ("x-forwarded-for", "192.0.2.4"),
            ("x-forwarded-proto", "http, https, http"),
        ]);
        let ip = |n| client_ip(&TrustProxy::Hops(n), peer, &h);
        assert_eq!(ip(1), "192.0.2.4".parse::<IpAddr>().unwrap());
        assert_eq!(ip(2), "198.51.100.7".parse::<IpAddr>().unwrap());
        assert_eq!(ip(3), "203.0.113.9".parse::<IpAddr>().unwrap());
        assert_eq!(ip(4), peer, "fewer entries than hops: not believed");
        assert_eq!(client_ip(&TrustProxy::Hops(1), peer, &headers(&[("x-forwarded-for", "junk")])), peer);
        assert!(!proven_https(&TrustProxy::Hops(1), sock, &h));
        assert!(proven_https(&TrustProxy::Hops(2), sock, &h));
        assert!(!proven_https(&TrustProxy::Hops(3), sock, &h));
        assert!(!proven_https(&TrustProxy::Hops(4), sock, &h), "fewer entries than hops: not HTTPS");
        assert!(!proven_https(&TrustProxy::Hops(1), sock, &HeaderMap::new()));
        assert!(!proven_https(&TrustProxy::Hops(1), Some(Transport::ApiGateway), &h));
    }

    fn any_header_value() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            "[\\[\\]:0-9a-fA-F.@%/ a-z-]{0,30}".prop_map(String::into_bytes),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// No Host, authority or forwarded header can make admission panic.
        #[test]
        fn admission_never_panics(
            values in proptest::collection::vec((0usize..10, any_header_value()), 0..8),
            uri_authority in "[\\[\\]:0-9a-z.@]{0,20}",
            prod in any::<bool>(),
            peer in any::<[u8; 4]>(),
        ) {
            const NAMES: [&str; 10] = ["host", "origin", "content-length", "x-forwarded-proto", "x-forwarded-for",
                "authorization", "x-tenant-id", "idempotency-key", "x-request-id", "accept"];
            let mut h = HeaderMap::new();
            for (i, v) in &values {
                if let Ok(v) = HeaderValue::from_bytes(v) {
                    h.append(NAMES[*i], v);
                }
            }
            let _ = RequestHost::parse(uri_authority.as_bytes());
            let uri = format!("http://{uri_authority}/mcp").parse::<Uri>().unwrap_or_else(|_| Uri::from_static("/mcp"));
            let mut config = crate::config::tests::dev_config();
            if prod {
                config.mode = Mode::Production;
                config.trust_proxy = TrustProxy::Peers(vec!["0.0.0.0/0".parse().unwrap()]);
            }
            let transport = Some(Transport::Socket { peer: IpAddr::from(peer) });
            let _ = admit_head(&config, config.agent_limits, &uri, &h, transport);
            let _ = client_ip(&config.trust_proxy, IpAddr::from(peer), &h);
        }
    }
}
