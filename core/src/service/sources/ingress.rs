//! Producer ingress (source bearer): authentication with every boundary rechecked on every
//! use, manifest admission, and the admission every report is checked against.
//! Must not depend on `http` or `mcp`.

use chrono::{DateTime, Utc};

use super::SourceService;
use super::{DeveloperLane, developer};
use crate::domain::source::*;
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::Tx;
use crate::service::records::accounts::policy_of;
use crate::service::records::sources::{
    BearerLookup, SourceRecord, bearer_key, check_still_admitted, may_register, source_in_room,
};
use crate::store::StoreError;

/// A source admitted to ingress for this request (every check of its credential held).
#[derive(Debug, Clone)]
pub struct AuthedSource {
    pub source: SourceRecord,
    pub bearer_hash: String,
}

impl AuthedSource {
    /// A report (a batch or a probe answer) must come under the source's admitted manifest
    /// and epoch: its manifest hash and epoch, or `manifest_not_registered` (an older epoch:
    /// `producer_epoch_stale`).
    pub(super) fn admitted_report(&self, epoch: u64, manifest_hash: &str) -> Result<(&str, u64), ApiError> {
        let s = &self.source;
        let (Some(admitted_hash), Some(admitted_epoch), true) = (&s.manifest_hash, s.producer_epoch, s.is_admitted())
        else {
            return Err(ApiError::ManifestNotRegistered);
        };
        if epoch < admitted_epoch {
            return Err(ApiError::ProducerEpochStale { current: admitted_epoch });
        }
        if epoch != admitted_epoch || !hashes_equal(manifest_hash, admitted_hash) {
            return Err(ApiError::ManifestNotRegistered);
        }
        Ok((admitted_hash, admitted_epoch))
    }

    /// The transaction guard of a report: the source is still active, under this bearer,
    /// admitted at this epoch when the write commits.
    pub(super) fn still_admitted(&self, tx: &mut Tx, epoch: u64) {
        check_still_admitted(tx, &self.source.room_id, &self.source.source_id, &self.bearer_hash, epoch);
    }
}

impl SourceRecord {
    /// The exact provenance of a report this source makes now, under its admitted
    /// manifest and epoch.
    pub(super) fn provenance_of(
        &self,
        manifest_hash: &str,
        producer_epoch: u64,
        request_id: &str,
        observed_at: DateTime<Utc>,
        received_at: DateTime<Utc>,
        probe_id: Option<String>,
    ) -> ObservationProvenance {
        ObservationProvenance {
            source_id: self.source_id.clone(),
            room_id: self.room_id.clone(),
            world_id: self.world_id.clone(),
            adapter_profile: self.adapter_profile.clone(),
            adapter_version: self.adapter_version.clone().unwrap_or_default(),
            adapter_hash: self.adapter_hash.clone().unwrap_or_default(),
            manifest_hash: manifest_hash.to_owned(),
            producer_epoch,
            request_id: request_id.to_owned(),
            observed_at,
            received_at,
            probe_id,
        }
    }
}

impl SourceService {
    /// Authenticates a source bearer: hash lookup, then every boundary again (source
    /// active with this exact bearer hash, unexpired; room active and still owned by the
    /// source's owner, who is still its owner member; the owner's policy still a
    /// developer's, unlocked). Any failure is the same `source_credential_invalid`.
    pub async fn authenticate_source(&self, raw_bearer: &str) -> Result<AuthedSource, ApiError> {
        let bearer = SourceBearer::parse(raw_bearer).ok_or(ApiError::SourceCredentialInvalid)?;
        let hash = bearer.hash();
        let lookup = self.store.get(&bearer_key(&hash)).await?.ok_or(ApiError::SourceCredentialInvalid)?;
        let lookup = BearerLookup::from_item(&lookup);
        // One BatchGetItem after the lookup: the source, its room, the owner's membership
        // and the owner's account (policy).
        let got = source_in_room(self.store.as_ref(), &lookup.room_id, &lookup.source_id, &lookup.owner_account, true)
            .await?;
        let source = got.source.ok_or(ApiError::SourceCredentialInvalid)?;
        if source.owner_account != lookup.owner_account {
            return Err(ApiError::SourceCredentialInvalid);
        }
        let current = source.bearer_hash.as_deref().is_some_and(|h| hashes_equal(h, &hash));
        let policy_ok = got
            .account
            .as_ref()
            .map(policy_of)
            .is_some_and(|p| developer(&self.config, &lookup.owner_account, &p, DeveloperLane::Producer).is_ok());
        if !source.credential_live(self.clock.epoch()) || !current || !got.owner_holds || !policy_ok {
            return Err(ApiError::SourceCredentialInvalid);
        }
        Ok(AuthedSource { source, bearer_hash: hash })
    }

    /// `POST …/ingress/manifest`: admitted only when it matches the registry and the
    /// source exactly; a lower producer epoch than the admitted one is refused.
    pub async fn register_manifest(&self, a: &AuthedSource, m: Manifest) -> Result<ManifestReceipt, ApiError> {
        let s = &a.source;
        m.check(&s.adapter_profile, &s.world_id).map_err(|r| ApiError::ManifestNotAdmitted { reason: r.reason() })?;
        if let Some(current) = s.producer_epoch.filter(|e| *e > m.producer_epoch) {
            return Err(ApiError::ProducerEpochStale { current });
        }
        let epoch = i64::try_from(m.producer_epoch)
            .map_err(|_| ApiError::InvalidRequest("producer_epoch: too large".into()))?;
        let registered = s.registered(
            &m.adapter_version,
            &m.adapter_hash,
            &m.manifest_hash,
            m.producer_epoch,
            rfc3339(self.clock.now()),
        );
        match self.store.put(registered.to_item(), Some(may_register(&a.bearer_hash, epoch))).await {
            Ok(()) => Ok(ManifestReceipt {
                schema: MANIFEST_RECEIPT_SCHEMA,
                source_id: s.source_id.clone(),
                admitted: true,
                producer_epoch: m.producer_epoch,
                manifest_hash: m.manifest_hash,
            }),
            Err(StoreError::ConditionFailed { current }) => match current.as_ref().map(SourceRecord::from_item) {
                Some(n)
                    if n.bearer_hash.as_deref() == Some(a.bearer_hash.as_str()) && n.status == SourceStatus::Active =>
                {
                    Err(ApiError::ProducerEpochStale { current: n.producer_epoch.unwrap_or(0) })
                }
                _ => Err(ApiError::SourceCredentialInvalid),
            },
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authed(admitted: Option<bool>, manifest_hash: Option<&str>, epoch: Option<u64>) -> AuthedSource {
        let source = SourceRecord {
            source_id: "src_1".into(),
            room_id: "room_1".into(),
            owner_account: "acct_1".into(),
            adapter_profile: "minecraft".into(),
            world_id: "w".into(),
            label: None,
            status: SourceStatus::Active,
            generation: 1,
            created_at: "t".into(),
            bearer_hash: Some("b".into()),
            delivery_hash: None,
            credential_expires_at: Some(i64::MAX),
            credentialed_at: None,
            admitted,
            adapter_version: Some("1.0.0".into()),
            adapter_hash: Some("a".into()),
            manifest_hash: manifest_hash.map(str::to_owned),
            producer_epoch: epoch,
            registered_at: None,
            revoked_at: None,
        };
        AuthedSource { source, bearer_hash: "b".into() }
    }

    #[test]
    fn a_report_comes_under_the_admitted_manifest_and_epoch_only() {
        let code = |r: Result<(&str, u64), ApiError>| match r {
            Ok((hash, epoch)) => format!("ok {hash} {epoch}"),
            Err(e) => e.code().to_owned(),
        };
        let admitted = authed(Some(true), Some("m"), Some(2));
        for (source, epoch, hash, want) in [
            (&admitted, 2, "m", "ok m 2"),
            (&admitted, 1, "m", "producer_epoch_stale"),
            (&admitted, 3, "m", "manifest_not_registered"),
            (&admitted, 2, "other", "manifest_not_registered"),
            (&authed(Some(false), Some("m"), Some(2)), 2, "m", "manifest_not_registered"),
            (&authed(None, None, None), 1, "m", "manifest_not_registered"),
        ] {
            assert_eq!(code(source.admitted_report(epoch, hash)), want, "epoch {epoch} hash {hash}");
        }
    }

    #[test]
    fn a_stale_epoch_names_the_admitted_one() {
        let stale = authed(Some(true), Some("m"), Some(5)).admitted_report(4, "m").unwrap_err();
        assert!(matches!(stale, ApiError::ProducerEpochStale { current: 5 }));
    }
}
