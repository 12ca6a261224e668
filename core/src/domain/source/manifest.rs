//! A producer's manifest and its admission against the registry and the source.
//! No I/O; must not depend on `store`, `service`, `http` or `mcp`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AdapterProfile, adapter, hashes_equal};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub adapter_profile: String,
    pub adapter_version: String,
    pub adapter_hash: String,
    pub world_id: String,
    pub manifest_hash: String,
    /// Monotonic per source: a lower epoch than the admitted one is refused.
    pub producer_epoch: u64,
}

/// Why a manifest was not admitted (each its own reason, never the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestRefusal {
    Profile,
    Version,
    AdapterHash,
    World,
    ManifestHash,
}

impl ManifestRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            ManifestRefusal::Profile => "adapter_profile_mismatch",
            ManifestRefusal::Version => "adapter_version_not_admitted",
            ManifestRefusal::AdapterHash => "adapter_hash_mismatch",
            ManifestRefusal::World => "world_mismatch",
            ManifestRefusal::ManifestHash => "manifest_hash_mismatch",
        }
    }
}

impl Manifest {
    /// Admitted only when it matches the registry and the source exactly.
    pub fn check(&self, source_profile: &str, source_world: &str) -> Result<&'static AdapterProfile, ManifestRefusal> {
        let profile = adapter(source_profile).ok_or(ManifestRefusal::Profile)?;
        if self.adapter_profile != profile.id {
            return Err(ManifestRefusal::Profile);
        }
        if self.adapter_version != profile.version {
            return Err(ManifestRefusal::Version);
        }
        if !hashes_equal(&self.adapter_hash, &profile.adapter_hash()) {
            return Err(ManifestRefusal::AdapterHash);
        }
        if self.world_id != source_world {
            return Err(ManifestRefusal::World);
        }
        if !hashes_equal(&self.manifest_hash, &profile.manifest_hash(source_world)) {
            return Err(ManifestRefusal::ManifestHash);
        }
        Ok(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::source::*;

    fn manifest(world: &str) -> Manifest {
        let p = adapter("minecraft").unwrap();
        Manifest {
            adapter_profile: p.id.into(),
            adapter_version: p.version.into(),
            adapter_hash: p.adapter_hash(),
            world_id: world.into(),
            manifest_hash: p.manifest_hash(world),
            producer_epoch: 1,
        }
    }

    #[test]
    fn manifests_must_match_the_registry_and_the_source_exactly() {
        assert!(manifest("w").check("minecraft", "w").is_ok());
        assert_eq!(manifest("w").check("fixture", "w"), Err(ManifestRefusal::Profile));
        assert_eq!(manifest("w").check("minecraft", "other"), Err(ManifestRefusal::World));
        let mut m = manifest("w");
        m.adapter_version = "2.0.0".into();
        assert_eq!(m.check("minecraft", "w"), Err(ManifestRefusal::Version));
        let mut m = manifest("w");
        m.adapter_hash = "sha256:00".into();
        assert_eq!(m.check("minecraft", "w"), Err(ManifestRefusal::AdapterHash));
        let mut m = manifest("w");
        m.manifest_hash = manifest("x").manifest_hash;
        assert_eq!(m.check("minecraft", "w"), Err(ManifestRefusal::ManifestHash));
    }
}
