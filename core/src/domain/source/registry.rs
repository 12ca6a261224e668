//! The code-owned environment adapter registry: configuration cannot invent a profile.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use super::PROBE_CAPABILITY;
use crate::domain::hash_parts;

/// One environment adapter profile the service admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterProfile {
    pub id: &'static str,
    /// The one admitted adapter version of this profile.
    pub version: &'static str,
    /// The observation event names this adapter may report.
    pub event_names: &'static [&'static str],
    /// Test and demo adapter only: never a production environment.
    pub fixture: bool,
    /// The environment-probe capabilities a producer of this adapter may answer.
    pub probe_capabilities: &'static [&'static str],
}

impl AdapterProfile {
    /// The adapter hash a producer must present: SHA-256 over the profile's exact
    /// observation contract, so a producer built for another contract is refused.
    pub fn adapter_hash(&self) -> String {
        let mut parts = vec!["helix-environment-adapter.v1", self.id, self.version];
        parts.extend_from_slice(self.event_names);
        format!("sha256:{}", hash_parts(&parts))
    }

    /// The manifest hash of a producer of this adapter for one world.
    pub fn manifest_hash(&self, world_id: &str) -> String {
        format!(
            "sha256:{}",
            hash_parts(&["helix-environment-manifest.v1", self.id, self.version, &self.adapter_hash(), world_id])
        )
    }
}

pub const REGISTRY: &[AdapterProfile] = &[
    AdapterProfile {
        id: "minecraft",
        version: "1.0.0",
        event_names: &[
            "player_joined",
            "player_left",
            "block_placed",
            "block_broken",
            "entity_spawned",
            "chat_message",
            "weather_changed",
            "inventory_changed",
        ],
        fixture: false,
        probe_capabilities: &[PROBE_CAPABILITY],
    },
    // The fixture adapter answers no probe: the one probe capability is Minecraft's own.
    AdapterProfile {
        id: "fixture",
        version: "1.0.0",
        event_names: &["fixture_tick", "fixture_marker"],
        fixture: true,
        probe_capabilities: &[],
    },
];

pub fn adapter(id: &str) -> Option<&'static AdapterProfile> {
    REGISTRY.iter().find(|a| a.id == id)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_code_owned_and_hashes_are_stable() {
        let mc = adapter("minecraft").unwrap();
        assert!(!mc.fixture && adapter("fixture").unwrap().fixture);
        assert!(adapter("factorio").is_none());
        assert_eq!(mc.adapter_hash(), mc.adapter_hash());
        assert_ne!(mc.adapter_hash(), adapter("fixture").unwrap().adapter_hash());
        assert_ne!(mc.manifest_hash("w1"), mc.manifest_hash("w2"));
    }
}
