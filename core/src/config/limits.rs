//! Per-lane body and rate limits, room source limits and freshness, and the socket
//! server's connection limits.
//! Reads variables only through `Env`; depends on nothing outside `config`.

use std::time::Duration;

use super::{ConfigError, Env, malformed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub body_bytes: usize,
    pub ip_per_minute: u32,
    pub principal_per_minute: u32,
}

/// The southbound connector routes' limits: small bodies (acknowledgements, a directory),
/// and per connector a poll rate well above the default interval (500 ms: 120 a minute).
pub const CONNECTOR_LIMITS: Limits = Limits { body_bytes: 64 * 1024, ip_per_minute: 1200, principal_per_minute: 600 };

/// Connection limits of the socket server (`helix serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// From the first byte of a request head (or from accept) to its last byte.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and no bytes arriving is closed after this.
    pub idle_timeout: Duration,
    /// From the end of the head to the end of the body.
    pub body_read_timeout: Duration,
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
}

/// Room sources (`HELIX_ROOM_SOURCE_*`, `HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceConfig {
    /// Same-origin source-manager and credential-claim lane: per IP and per account.
    pub browser_limits: Limits,
    /// Producer ingress: body limit, per-IP (before auth) and per-source (after auth).
    pub ingress_limits: Limits,
    /// Freshness ceiling of bound-room evidence.
    pub evidence_max_age: Duration,
    /// How long a stored observation lives (TTL).
    pub observation_ttl: Duration,
    /// How long a turn of a `bound_room_environment_probe` run waits for the producer's
    /// answer (`HELIX_ROOM_PROBE_WAIT_MS`), clamped again to the turn's own budget.
    pub probe_wait: Duration,
}

/// Player embodiment's timing (`HELIX_EMBODIMENT_*`): how long a queued workflow waits
/// for dispatch before it is `expired`, and how long one step may take at the connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbodimentConfig {
    pub queue_ttl_secs: i64,
    pub step_deadline_ms: i64,
}

impl Default for EmbodimentConfig {
    fn default() -> Self {
        Self { queue_ttl_secs: 600, step_deadline_ms: 30_000 }
    }
}

/// `HELIX_EMBODIMENT_QUEUE_TTL_SECS` (1-3600) and `HELIX_EMBODIMENT_STEP_DEADLINE_MS`
/// (1000-300000); a value out of range refuses to start rather than being clamped.
pub(super) fn embodiment(env: &Env) -> Result<EmbodimentConfig, ConfigError> {
    let d = EmbodimentConfig::default();
    let queue_ttl_secs = match env.number("HELIX_EMBODIMENT_QUEUE_TTL_SECS", d.queue_ttl_secs as u64)? {
        n @ 1..=3_600 => n as i64,
        _ => return Err(malformed("HELIX_EMBODIMENT_QUEUE_TTL_SECS", "must be 1-3600 s")),
    };
    let step_deadline_ms = match env.number("HELIX_EMBODIMENT_STEP_DEADLINE_MS", d.step_deadline_ms as u64)? {
        n @ 1_000..=300_000 => n as i64,
        _ => return Err(malformed("HELIX_EMBODIMENT_STEP_DEADLINE_MS", "must be 1000-300000 ms")),
    };
    Ok(EmbodimentConfig { queue_ttl_secs, step_deadline_ms })
}

/// Connection limits of `helix serve` (Lambda has no connections of its own).
pub(super) fn server_limits(env: &Env) -> Result<ServerLimits, ConfigError> {
    let ms = |name: &'static str, default: u64| -> Result<Duration, ConfigError> {
        match env.number(name, default)? {
            n @ 1..=3_600_000 => Ok(Duration::from_millis(n)),
            _ => Err(malformed(name, "must be 1-3600000 ms")),
        }
    };
    let max_connections = match env.number("HELIX_SERVE_MAX_CONNECTIONS", 512)? {
        n @ 1..=65_535 => n as usize,
        _ => return Err(malformed("HELIX_SERVE_MAX_CONNECTIONS", "must be 1-65535")),
    };
    Ok(ServerLimits {
        header_read_timeout: ms("HELIX_SERVE_HEADER_TIMEOUT_MS", 10_000)?,
        idle_timeout: ms("HELIX_SERVE_IDLE_TIMEOUT_MS", 60_000)?,
        body_read_timeout: ms("HELIX_SERVE_BODY_TIMEOUT_MS", 30_000)?,
        max_connections,
    })
}

pub(super) fn limits(
    env: &Env,
    body: &'static str,
    ip: &'static str,
    principal: &'static str,
) -> Result<Limits, ConfigError> {
    Ok(Limits {
        body_bytes: env.number(body, 256 * 1024)?.clamp(1024, 6 * 1024 * 1024) as usize,
        ip_per_minute: env.number(ip, 600)? as u32,
        principal_per_minute: env.number(principal, 300)? as u32,
    })
}

/// Room sources: the browser credential lane (same-origin, per IP and per account) and
/// the producer ingress (its own body limit, per IP before auth, per source after).
pub(super) fn sources(env: &Env) -> Result<SourceConfig, ConfigError> {
    Ok(SourceConfig {
        browser_limits: Limits {
            body_bytes: 16 * 1024,
            ..limits(
                env,
                "HELIX_ROOM_AGENT_BODY_LIMIT",
                "HELIX_ROOM_SOURCE_BROWSER_IP_RATE_LIMIT",
                "HELIX_ROOM_SOURCE_BROWSER_ACCOUNT_RATE_LIMIT",
            )?
        },
        ingress_limits: Limits {
            body_bytes: env.number("HELIX_ROOM_SOURCE_INGRESS_BODY_LIMIT", 64 * 1024)?.clamp(1024, 1024 * 1024)
                as usize,
            ip_per_minute: env.number("HELIX_ROOM_SOURCE_INGRESS_IP_RATE_LIMIT", 1_200)? as u32,
            principal_per_minute: env.number("HELIX_ROOM_SOURCE_INGRESS_SOURCE_RATE_LIMIT", 600)? as u32,
        },
        evidence_max_age: Duration::from_millis(
            env.number("HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS", 120_000)?.clamp(1_000, 86_400_000),
        ),
        observation_ttl: Duration::from_secs(
            env.number("HELIX_ROOM_SOURCE_OBSERVATION_TTL_SECS", 3_600)?.clamp(60, 7 * 86_400),
        ),
        probe_wait: Duration::from_millis(env.number("HELIX_ROOM_PROBE_WAIT_MS", 5_000)?.clamp(100, 25_000)),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::ConfigError;
    use crate::config::tests::{dev_config, prod_with};

    #[test]
    fn server_limits_have_defaults_and_refuse_zero() {
        let c = dev_config();
        assert_eq!(c.server.header_read_timeout, Duration::from_secs(10));
        assert_eq!(c.server.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.server.body_read_timeout, Duration::from_secs(30));
        assert_eq!(c.server.max_connections, 512);
        for name in [
            "HELIX_SERVE_HEADER_TIMEOUT_MS",
            "HELIX_SERVE_IDLE_TIMEOUT_MS",
            "HELIX_SERVE_BODY_TIMEOUT_MS",
            "HELIX_SERVE_MAX_CONNECTIONS",
        ] {
            assert!(matches!(prod_with(&[(name, "0")]), Err(ConfigError::Malformed { name: n, .. }) if n == name));
        }
        let c = prod_with(&[("HELIX_SERVE_MAX_CONNECTIONS", "3"), ("HELIX_SERVE_IDLE_TIMEOUT_MS", "250")]).unwrap();
        assert_eq!((c.server.max_connections, c.server.idle_timeout), (3, Duration::from_millis(250)));
    }

    #[test]
    fn embodiment_timing_has_defaults_and_refuses_out_of_range() {
        let c = dev_config();
        assert_eq!((c.embodiment.queue_ttl_secs, c.embodiment.step_deadline_ms), (600, 30_000));
        for (name, bad) in [
            ("HELIX_EMBODIMENT_QUEUE_TTL_SECS", "0"),
            ("HELIX_EMBODIMENT_QUEUE_TTL_SECS", "3601"),
            ("HELIX_EMBODIMENT_STEP_DEADLINE_MS", "999"),
            ("HELIX_EMBODIMENT_STEP_DEADLINE_MS", "soon"),
        ] {
            assert!(matches!(prod_with(&[(name, bad)]), Err(ConfigError::Malformed { name: n, .. }) if n == name));
        }
        let c = prod_with(&[("HELIX_EMBODIMENT_QUEUE_TTL_SECS", "3"), ("HELIX_EMBODIMENT_STEP_DEADLINE_MS", "2000")])
            .unwrap();
        assert_eq!((c.embodiment.queue_ttl_secs, c.embodiment.step_deadline_ms), (3, 2_000));
    }
}
