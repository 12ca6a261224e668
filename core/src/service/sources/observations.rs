//! Observation batches (`POST …/ingress/observations`) and the freshness window the run
//! lane reads. Must not depend on `http` or `mcp`.

use super::AuthedSource;
use super::SourceService;
use crate::domain::source::*;
use crate::domain::time::{epoch_rfc3339, rfc3339};
use crate::error::ApiError;
use crate::service::records::observations::{
    HealthMarker, StoredObservation, commit_report, fresh_observations_of_source, is_duplicate,
};
use crate::service::records::{Role, Tx, TxFailure};

/// What a refused report transaction answers: the source no longer admitted at this epoch
/// (revoked, rotated, registered again) is `manifest_not_registered`, a request identity
/// the source already used is `duplicate_observation`, anything else is the store's error.
fn refused(f: TxFailure) -> ApiError {
    if f.failed(Role::Source) {
        ApiError::ManifestNotRegistered
    } else if is_duplicate(&f) {
        ApiError::DuplicateObservation
    } else {
        f.into()
    }
}

impl SourceService {
    /// `POST …/ingress/observations`: a bounded batch under the admitted manifest and
    /// epoch, stored with a TTL and its exact provenance, all or nothing.
    pub async fn ingest_observations(
        &self,
        a: &AuthedSource,
        batch: ObservationBatch,
    ) -> Result<ObservationReceipt, ApiError> {
        let s = &a.source;
        let (manifest_hash, epoch) = a.admitted_report(batch.producer_epoch, &batch.manifest_hash)?;
        let profile = adapter(&s.adapter_profile).ok_or(ApiError::SourceCredentialInvalid)?;
        let now = self.clock.now();
        let ttl = self.config.sources.observation_ttl;
        batch.validate(profile, now.timestamp_millis(), ttl.as_millis() as i64)?;
        let expires = now.timestamp() + ttl.as_secs() as i64;
        let accepted = batch.observations.len() as u32;
        let mut tx = Tx::new();
        let mut latest = 0i64;
        for o in batch.observations {
            latest = latest.max(o.observed_at.timestamp_millis());
            let stored = StoredObservation {
                schema_version: crate::service::records::observations::OBSERVATION_BODY_VERSION,
                observation_ref: observation_ref(&s.source_id, &o.request_id),
                credential_generation: s.generation,
                provenance: s.provenance_of(manifest_hash, epoch, &o.request_id, o.observed_at, now, None),
                kind: o.kind,
                event: o.event,
                summary: o.summary,
                data: o.data,
            };
            stored.put(&mut tx, expires)?;
        }
        // An older batch after a newer one is stored; the newer health marker stays.
        HealthMarker { last_observed_at_ms: latest, last_received_at: rfc3339(now), expires_at: expires }
            .put_forward(&mut tx, &s.source_id);
        a.still_admitted(&mut tx, epoch);
        commit_report(self.store.as_ref(), tx).await.map_err(refused)?;
        Ok(ObservationReceipt {
            schema: OBSERVATION_RECEIPT_SCHEMA,
            source_id: s.source_id.clone(),
            accepted,
            expires_at: epoch_rfc3339(expires),
        })
    }

    /// The newest (at most `limit`) stored observations of a source observed within
    /// `max_age_ms` of now, oldest first.
    pub async fn fresh_observations(
        &self,
        source_id: &str,
        max_age_ms: i64,
        limit: usize,
    ) -> Result<Vec<StoredObservation>, ApiError> {
        let since = self.clock.now().timestamp_millis() - max_age_ms;
        fresh_observations_of_source(self.store.as_ref(), source_id, since, limit).await
    }
}
