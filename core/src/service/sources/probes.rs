//! The environment probe (`bound_room_environment_probe`): on a turn of a run that holds
//! the scope, after the room rechecks, the service queues one probe for the bound room's
//! paired read-only source (idempotent per run, step and claim), and waits a bounded time
//! for the producer's answer. The producer finds the probe on its next poll of ingress and
//! answers it there; the answer is stored as an observation with its exact provenance
//! (including the probe id) and handed to the executor as a current-turn observation. A
//! probe is a read, never an action. The items are the kernel's (`records::probes`).
//! Must not depend on `http` or `mcp`.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::SourceService;
use super::evidence::{BoundRoom, projected, provenance_matches};
use super::{AuthedSource, SourceRecord, StoredObservation};
use crate::domain::source::*;
use crate::domain::time::{from_millis, rfc3339};
use crate::domain::turn::TurnFailure;
use crate::error::ApiError;
use crate::service::records::observations::{
    HealthMarker, OBSERVATION_BODY_VERSION, commit_report, put_request_marker,
};
use crate::service::records::probes::{ProbeRecord, pending_probes_of_source, probe_key, status_of};
use crate::service::records::{Role, Tx};

/// How often a waiting turn reads its probe.
pub const PROBE_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// What a turn keeps of its budget for the executor after the probe wait.
pub const PROBE_EXECUTOR_RESERVE: Duration = Duration::from_millis(500);

fn unavailable<E>(_: E) -> TurnFailure {
    TurnFailure::RoomEvidenceUnavailable
}

/// The probe a turn waits for.
struct Queued {
    probe_id: String,
    source: SourceRecord,
    until_ms: i64,
}

impl SourceService {
    /// The bound room's paired source for `capability`: its one active, credentialed,
    /// admitted source whose adapter answers the capability. None is
    /// `room_source_not_admitted`; more than one is `room_probe_source_ambiguous`.
    async fn paired_source(&self, bound: &BoundRoom, capability: &str) -> Result<SourceRecord, TurnFailure> {
        let mut paired: Vec<SourceRecord> = self
            .admitted_sources(bound)
            .await?
            .into_iter()
            .filter(|s| adapter(&s.adapter_profile).is_some_and(|a| a.probe_capabilities.contains(&capability)))
            .collect();
        match paired.len() {
            0 => Err(TurnFailure::RoomSourceNotAdmitted),
            1 => Ok(paired.remove(0)),
            _ => Err(TurnFailure::RoomProbeSourceAmbiguous),
        }
    }

    /// Queues the probe of one turn (idempotent: its id derives from run, step and claim).
    async fn queue_probe(
        &self,
        bound: &BoundRoom,
        run_id: &str,
        step: u32,
        claim_token: &str,
        wait: Duration,
    ) -> Result<Queued, TurnFailure> {
        let source = self.paired_source(bound, PROBE_CAPABILITY).await?;
        let probe_id = probe_id(run_id, step, claim_token);
        let now_ms = self.clock.now().timestamp_millis();
        let until_ms = now_ms + wait.as_millis() as i64;
        let record = ProbeRecord {
            probe_id: probe_id.clone(),
            source_id: source.source_id.clone(),
            room_id: bound.room_id.clone(),
            world_id: source.world_id.clone(),
            run_id: run_id.to_owned(),
            step,
            binding_ref: bound.binding_ref.clone(),
            capability: PROBE_CAPABILITY.to_owned(),
            requested_at_ms: now_ms,
            answer_until_ms: until_ms,
            status: Some(ProbeStatus::Pending),
            expires_at: (until_ms / 1000) + 1 + self.config.sources.observation_ttl.as_secs() as i64,
            answer: None,
        };
        let mut tx = Tx::new();
        record.queue(&mut tx).map_err(unavailable)?;
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => Ok(Queued { probe_id, source, until_ms }),
            // Already queued by this very turn: wait for it under its own deadline.
            Err(f) if f.failed(Role::Probe) => {
                let item = self.store.get(&record.key()).await.map_err(unavailable)?;
                let stored = item.as_ref().map(ProbeRecord::from_item).transpose().map_err(unavailable)?;
                let until_ms = stored.map_or(now_ms, |r| r.answer_until_ms);
                Ok(Queued { probe_id, source, until_ms })
            }
            Err(f) => Err(unavailable(f)),
        }
    }

    /// The probe of one turn: queue it for the paired source, wait at most `wait` for
    /// the answer, and return it as the turn's probe input. No answer in time is
    /// `room_probe_unanswered` (the probe is closed first, so a late answer is refused).
    pub async fn probe_room(
        &self,
        bound: &BoundRoom,
        run_id: &str,
        step: u32,
        claim_token: &str,
        wait: Duration,
        cancel: &CancellationToken,
    ) -> Result<RoomProbeInput, TurnFailure> {
        let q = self.queue_probe(bound, run_id, step, claim_token, wait).await?;
        let key = probe_key(&q.source.source_id, &q.probe_id);
        let started = tokio::time::Instant::now();
        let waited = Duration::from_millis((q.until_ms - self.clock.now().timestamp_millis()).max(0) as u64);
        let mut unanswered = TurnFailure::RoomProbeUnanswered;
        loop {
            let item = self.store.get(&key).await.map_err(unavailable)?;
            match status_of(item.as_ref()) {
                Some(ProbeStatus::Answered) => return self.probe_input(bound, &q, item.as_ref()),
                Some(ProbeStatus::Pending) => {}
                _ => return Err(TurnFailure::RoomProbeUnanswered),
            }
            if started.elapsed() >= waited {
                break;
            }
            let pause = PROBE_POLL_INTERVAL.min(waited.saturating_sub(started.elapsed()));
            tokio::select! {
                _ = cancel.cancelled() => {
                    unanswered = TurnFailure::TurnCancelled;
                    break;
                }
                _ = tokio::time::sleep(pause) => {}
            }
        }
        if unanswered == TurnFailure::TurnCancelled {
            // The run was cancelled: close the probe so its producer is not asked further.
            let _ = self.close_probe(&key).await;
            return Err(TurnFailure::TurnCancelled);
        }
        self.close_probe(&key).await.and_then(|answered| match answered {
            Some(item) => self.probe_input(bound, &q, Some(&item)),
            None => Err(unanswered),
        })
    }

    /// Closes a probe (pending -> expired, pending marker deleted), unless the answer won
    /// the race: then the answered record.
    async fn close_probe(&self, key: &crate::store::Key) -> Result<Option<crate::store::Item>, TurnFailure> {
        let Some(item) = self.store.get(key).await.map_err(unavailable)? else { return Ok(None) };
        let mut closed = ProbeRecord::from_item(&item).map_err(unavailable)?;
        closed.status = Some(ProbeStatus::Expired);
        let mut tx = Tx::new();
        closed.leave_pending(&mut tx, false).map_err(unavailable)?;
        match tx.commit(self.store.as_ref()).await {
            Ok(()) => Ok(None),
            // The answer won the race (or a concurrent answer contended): read what holds.
            Err(f) if f.is_cancelled() => {
                let item = self.store.get(key).await.map_err(unavailable)?;
                Ok(item.filter(|i| status_of(Some(i)) == Some(ProbeStatus::Answered)))
            }
            Err(f) => Err(unavailable(f)),
        }
    }

    /// The answered probe as the executor sees it; its provenance must match the paired
    /// source's admission exactly.
    fn probe_input(
        &self,
        bound: &BoundRoom,
        q: &Queued,
        item: Option<&crate::store::Item>,
    ) -> Result<RoomProbeInput, TurnFailure> {
        let record = item.map(ProbeRecord::from_item).transpose().map_err(unavailable)?;
        let answer = record.and_then(|r| r.answer).ok_or(TurnFailure::RoomEvidenceUnavailable)?;
        if !provenance_matches(&answer, &q.source) || answer.provenance.probe_id.as_deref() != Some(q.probe_id.as_str())
        {
            return Err(TurnFailure::RoomEvidenceIdentityMismatch);
        }
        Ok(RoomProbeInput {
            probe_id: q.probe_id.clone(),
            capability: PROBE_CAPABILITY.into(),
            room_id: bound.room_id.clone(),
            binding_ref: bound.binding_ref.clone(),
            execution_enabled: false,
            answer: projected(answer),
        })
    }

    // ---------- the producer's side (source bearer) ----------

    /// `GET …/ingress/probes`: the pending, unexpired probes of the calling source only.
    pub async fn pending_probes(&self, a: &AuthedSource) -> Result<ProbeList, ApiError> {
        let s = &a.source;
        let pending = pending_probes_of_source(self.store.as_ref(), &s.source_id, MAX_POLLED_PROBES).await?;
        let now_ms = self.clock.now().timestamp_millis();
        let probes = pending
            .into_iter()
            .filter(|p| p.answer_until_ms > now_ms)
            .map(|p| ProbeView {
                schema: PROBE_SCHEMA.into(),
                probe_id: p.probe_id,
                source_id: s.source_id.clone(),
                world_id: p.world_id,
                capability: p.capability,
                requested_at: from_millis(p.requested_at_ms),
                expires_at: from_millis(p.answer_until_ms),
                read_only: true,
                execution_enabled: false,
            })
            .collect();
        Ok(ProbeList { schema: PROBE_LIST_SCHEMA.into(), source_id: s.source_id.clone(), probes })
    }

    /// `POST …/ingress/probes/{probe_id}/answer`: accepted only from the source the probe
    /// was queued for (another source's probe is `probe_not_found`: it lives in another
    /// partition), only while pending and unexpired, only once, under the admitted
    /// manifest and epoch; stored with its exact provenance in one transaction.
    pub async fn answer_probe(
        &self,
        a: &AuthedSource,
        probe_id: &str,
        answer: ProbeAnswer,
    ) -> Result<ProbeAnswerReceipt, ApiError> {
        let s = &a.source;
        if !probe_id_ok(probe_id) {
            return Err(ApiError::ProbeNotFound);
        }
        let (manifest_hash, epoch) = a.admitted_report(answer.producer_epoch, &answer.manifest_hash)?;
        let key = probe_key(&s.source_id, probe_id);
        let record = self.store.get(&key).await?.map(|i| ProbeRecord::from_item(&i)).transpose()?;
        let mut record = record.filter(|r| r.source_id == s.source_id).ok_or(ApiError::ProbeNotFound)?;
        let now = self.clock.now();
        let now_ms = now.timestamp_millis();
        match record.status {
            Some(ProbeStatus::Pending) if record.answer_until_ms > now_ms => {}
            other => return Err(ApiError::ProbeNotPending { reason: ProbeStatus::not_pending_reason(other) }),
        }
        answer.validate(&record.capability, record.requested_at_ms, now_ms)?;
        let stored = StoredObservation {
            schema_version: OBSERVATION_BODY_VERSION,
            observation_ref: observation_ref(&s.source_id, &answer.request_id),
            credential_generation: s.generation,
            provenance: s.provenance_of(
                manifest_hash,
                epoch,
                &answer.request_id,
                answer.observed_at,
                now,
                Some(probe_id.to_owned()),
            ),
            kind: ObservationKind::Snapshot,
            event: None,
            summary: answer.summary.clone(),
            data: answer.data(&record.capability),
        };
        let observation_ref = stored.observation_ref.clone();
        record.status = Some(ProbeStatus::Answered);
        record.answer = Some(stored);
        let expires = now.timestamp() + self.config.sources.observation_ttl.as_secs() as i64;
        let mut tx = Tx::new();
        record.leave_pending(&mut tx, true)?;
        // The request identity is unique per source, across observations and answers.
        put_request_marker(&mut tx, &s.source_id, &answer.request_id, expires, Some(probe_id));
        a.still_admitted(&mut tx, epoch);
        // The source's connection-health marker (Device Check), moved as a batch moves it.
        HealthMarker {
            last_observed_at_ms: answer.observed_at.timestamp_millis(),
            last_received_at: rfc3339(now),
            expires_at: expires,
        }
        .put_forward(&mut tx, &s.source_id);
        match commit_report(self.store.as_ref(), tx).await {
            Ok(()) => Ok(ProbeAnswerReceipt {
                schema: PROBE_ANSWER_RECEIPT_SCHEMA,
                probe_id: probe_id.to_owned(),
                source_id: s.source_id.clone(),
                observation_ref,
                accepted: true,
            }),
            Err(f) if f.failed(Role::Source) => Err(ApiError::ManifestNotRegistered),
            Err(f) if f.failed(Role::Probe) => {
                let now = self.store.get(&key).await?;
                Err(ApiError::ProbeNotPending { reason: ProbeStatus::not_pending_reason(status_of(now.as_ref())) })
            }
            Err(f) if f.failed(Role::PendingProbe) => Err(ApiError::ProbeNotPending { reason: "expired" }),
            Err(f) if f.failed(Role::RequestMarker) => Err(ApiError::DuplicateObservation),
            // Contended by a concurrent write of the same probe: retryable.
            Err(f) if f.is_cancelled() => Err(ApiError::Unavailable(Box::new(f.into_store_error()))),
            Err(f) => Err(f.into()),
        }
    }
}
