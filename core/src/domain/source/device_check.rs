//! Device Check: each source's connection health, never a credential, endpoint or player.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::Serialize;

use super::SourceStatus;
use crate::domain::room::FalseFlags;

pub const DEVICE_CHECK_SCHEMA: &str = "helix.environment_device_check.v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    /// The last observation is within the bound-room evidence freshness ceiling.
    Fresh,
    /// Older than the ceiling.
    Stale,
    /// Nothing observed (or everything observed has expired).
    NoObservations,
}

impl Freshness {
    /// The freshness of a source whose newest observation is `age_ms` old (None: none
    /// observed) under the ceiling `max_age_ms` (inclusive).
    pub fn of(age_ms: Option<u64>, max_age_ms: u64) -> Self {
        match age_ms {
            None => Freshness::NoObservations,
            Some(a) if a <= max_age_ms => Freshness::Fresh,
            Some(_) => Freshness::Stale,
        }
    }
}

/// One source's connection health: never a credential, endpoint or player id.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SourceHealth {
    pub source_id: String,
    pub adapter_profile: String,
    pub status: SourceStatus,
    pub credentialed: bool,
    /// A producer manifest was registered under the current credential.
    pub registered: bool,
    /// That manifest was admitted against the registry and the source.
    pub admitted: bool,
    pub producer_epoch: Option<u64>,
    /// Milliseconds since the newest observation was observed (null: none).
    pub last_observation_age_ms: Option<u64>,
    pub freshness: Freshness,
}

/// One room of the caller with its sources.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RoomHealth {
    pub room_id: String,
    pub sources: Vec<SourceHealth>,
}

/// `helix.environment_device_check.v1`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct DeviceCheckReport {
    pub schema: &'static str,
    pub rooms: Vec<RoomHealth>,
    /// The `cursor` of the next page of rooms; null on the last page.
    pub next_cursor: Option<String>,
    pub freshness_max_age_ms: u64,
    pub checked_at: String,
    pub execution_enabled: bool,
    #[serde(flatten)]
    pub flags: FalseFlags,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_is_fresh_up_to_the_ceiling_and_stale_past_it() {
        for (age, want) in [
            (None, Freshness::NoObservations),
            (Some(0), Freshness::Fresh),
            (Some(60_000), Freshness::Fresh),
            (Some(60_001), Freshness::Stale),
        ] {
            assert_eq!(Freshness::of(age, 60_000), want, "{age:?}");
        }
    }
}
