//! The environment probe (`bound_room_environment_probe`): on a turn of a run that holds
//! the scope, after the room rechecks, the service queues one probe item for the bound
//! room's paired read-only source (idempotent per run, step and claim), and waits a
//! bounded time for the producer's answer. The producer finds the probe on its next poll
//! of ingress and answers it there; the answer is stored as an observation with its exact
//! provenance (including the probe id) and handed to the executor as a current-turn
//! observation. A probe is a read, never an action. Must not depend on `http` or `mcp`.
//!
//! Items (partition `SRCPROBE#<source_id>`, so a source can only ever see and answer its
//! own probes): `PROBE#<probe_id>` (the record: pending, answered or expired; kept for
//! the observation TTL) and `PENDING#<probe_id>` (present only while the probe may be
//! answered; TTL at its answer deadline; what a poll reads).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::domain::source::*;
use crate::domain::turn::TurnFailure;
use crate::error::ApiError;
use crate::store::{CancelReason, Cond, EXPIRES_AT, Item, Key, StoreError, WriteOp};

use super::Services;
use super::records::BODY;
use super::room_evidence::{BoundRoom, projected, provenance_matches};
use super::rooms::rfc3339;
use super::sources::{AuthedSource, Source, StoredObservation, health_key, observations_pk};

/// How often a waiting turn reads its probe.
pub const PROBE_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// What a turn keeps of its budget for the executor after the probe wait.
pub const PROBE_EXECUTOR_RESERVE: Duration = Duration::from_millis(500);

pub fn probe_key(source_id: &str, probe_id: &str) -> Key {
    Key::new(format!("SRCPROBE#{source_id}"), format!("PROBE#{probe_id}"))
}

pub fn pending_key(source_id: &str, probe_id: &str) -> Key {
    Key::new(format!("SRCPROBE#{source_id}"), format!("PENDING#{probe_id}"))
}

fn ms_time(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
}

fn unavailable<E>(_: E) -> TurnFailure {
    TurnFailure::RoomEvidenceUnavailable
}

fn failed(e: &StoreError, index: usize) -> bool {
    matches!(e, StoreError::TransactionCanceled { reasons } if matches!(reasons.get(index), Some(CancelReason::ConditionFailed { .. })))
}

/// The probe a turn waits for.
struct Queued {
    probe_id: String,
    source: Source,
    until_ms: i64,
}

impl Services {
    /// The bound room's paired source for `capability`: its one active, credentialed,
    /// admitted source whose adapter answers the capability. None is
    /// `room_source_not_admitted`; more than one is `room_probe_source_ambiguous`.
    async fn paired_source(&self, bound: &BoundRoom, capability: &str) -> Result<Source, TurnFailure> {
        let mut paired: Vec<Source> = self
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
        let retain = (until_ms / 1000) + 1 + self.config.sources.observation_ttl.as_secs() as i64;
        let pk = probe_key(&source.source_id, &probe_id);
        let record = Item::new(pk.pk, pk.sk)
            .with_s("probe_id", &probe_id)
            .with_s("source_id", &source.source_id)
            .with_s("room_id", &bound.room_id)
            .with_s("world_id", &source.world_id)
            .with_s("run_id", run_id)
            .with_n("step", step as i64)
            .with_s("binding_ref", &bound.binding_ref)
            .with_s("capability", PROBE_CAPABILITY)
            .with_n("requested_at_ms", now_ms)
            .with_n("answer_until_ms", until_ms)
            .with_s("status", "pending")
            .with_n(EXPIRES_AT, retain);
        let pend = pending_key(&source.source_id, &probe_id);
        let pending = Item::new(pend.pk, pend.sk)
            .with_s("probe_id", &probe_id)
            .with_s("world_id", &source.world_id)
            .with_s("capability", PROBE_CAPABILITY)
            .with_n("requested_at_ms", now_ms)
            .with_n("answer_until_ms", until_ms)
            .with_n(EXPIRES_AT, until_ms.div_euclid(1000) + 1);
        let ops = vec![
            WriteOp::Put { item: record, cond: Some(Cond::NotExists) },
            WriteOp::Put { item: pending, cond: Some(Cond::NotExists) },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(Queued { probe_id, source, until_ms }),
            // Already queued by this very turn: wait for it under its own deadline.
            Err(e) if failed(&e, 0) => {
                let item = self.store.get(&probe_key(&source.source_id, &probe_id)).await.map_err(unavailable)?;
                let until_ms = item.and_then(|i| i.n("answer_until_ms")).unwrap_or(now_ms);
                Ok(Queued { probe_id, source, until_ms })
            }
            Err(e) => Err(unavailable(e)),
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
            match item.as_ref().and_then(|i| i.s("status")) {
                Some("answered") => return self.probe_input(bound, &q, item.as_ref()),
                Some("pending") => {}
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
            let _ = self.close_probe(&q, &key).await;
            return Err(TurnFailure::TurnCancelled);
        }
        self.close_probe(&q, &key).await.and_then(|answered| match answered {
            Some(item) => self.probe_input(bound, &q, Some(&item)),
            None => Err(unanswered),
        })
    }

    /// Closes a probe (pending -> expired, pending marker deleted), unless the answer won
    /// the race: then the answered record.
    async fn close_probe(&self, q: &Queued, key: &Key) -> Result<Option<Item>, TurnFailure> {
        let Some(mut closed) = self.store.get(key).await.map_err(unavailable)? else { return Ok(None) };
        closed.attrs.insert("status".into(), crate::store::Attr::S("expired".into()));
        let ops = vec![
            WriteOp::Put { item: closed, cond: Some(Cond::eq_s("status", "pending")) },
            WriteOp::Delete { key: pending_key(&q.source.source_id, &q.probe_id), cond: None },
        ];
        match self.store.transact(ops).await {
            Ok(()) => Ok(None),
            // The answer won the race (or a concurrent answer contended): read what holds.
            Err(StoreError::TransactionCanceled { .. }) => {
                let item = self.store.get(key).await.map_err(unavailable)?;
                Ok(item.filter(|i| i.s("status") == Some("answered")))
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The answered probe as the executor sees it; its provenance must match the paired
    /// source's admission exactly.
    fn probe_input(&self, bound: &BoundRoom, q: &Queued, item: Option<&Item>) -> Result<RoomProbeInput, TurnFailure> {
        let body = item.and_then(|i| i.s(BODY)).ok_or(TurnFailure::RoomEvidenceUnavailable)?;
        let answer: StoredObservation = serde_json::from_str(body).map_err(unavailable)?;
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
        let pk = pending_key(&s.source_id, "").pk;
        let page = self.store.query(&pk, "PENDING#", None, MAX_POLLED_PROBES).await?;
        let now_ms = self.clock.now().timestamp_millis();
        let probes = page
            .items
            .iter()
            .filter(|i| i.n("answer_until_ms").is_some_and(|until| until > now_ms))
            .map(|i| ProbeView {
                schema: PROBE_SCHEMA.into(),
                probe_id: i.s("probe_id").unwrap_or_default().to_owned(),
                source_id: s.source_id.clone(),
                world_id: i.s("world_id").unwrap_or_default().to_owned(),
                capability: i.s("capability").unwrap_or_default().to_owned(),
                requested_at: ms_time(i.n("requested_at_ms").unwrap_or(0)),
                expires_at: ms_time(i.n("answer_until_ms").unwrap_or(0)),
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
        let record = self.store.get(&key).await?.filter(|i| i.s("source_id") == Some(s.source_id.as_str()));
        let mut record = record.ok_or(ApiError::ProbeNotFound)?;
        let now = self.clock.now();
        let now_ms = now.timestamp_millis();
        match record.s("status") {
            Some("pending") if record.n("answer_until_ms").is_some_and(|until| until > now_ms) => {}
            Some("answered") => return Err(ApiError::ProbeNotPending { reason: "answered" }),
            _ => return Err(ApiError::ProbeNotPending { reason: "expired" }),
        }
        let capability = record.s("capability").unwrap_or_default().to_owned();
        answer.validate(&capability, record.n("requested_at_ms").unwrap_or(0), now_ms)?;
        let stored = StoredObservation {
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
            data: answer.data(&capability),
        };
        let body = serde_json::to_string(&stored).map_err(ApiError::internal)?;
        record.attrs.insert("status".into(), crate::store::Attr::S("answered".into()));
        record.attrs.insert(BODY.into(), crate::store::Attr::S(body));
        record.attrs.insert("observation_ref".into(), crate::store::Attr::S(stored.observation_ref.clone()));
        // The request identity is unique per source, across observations and answers.
        let marker = Item::new(observations_pk(&s.source_id), format!("REQ#{}", answer.request_id))
            .with_n(EXPIRES_AT, now.timestamp() + self.config.sources.observation_ttl.as_secs() as i64)
            .with_s("probe_id", probe_id);
        // The source's connection-health marker (Device Check), as an observation batch moves
        // it: only forward. Last, so that its failure (a newer batch) is told apart below.
        let latest = answer.observed_at.timestamp_millis();
        let hk = health_key(&s.source_id);
        let health = WriteOp::Put {
            item: Item::new(hk.pk, hk.sk)
                .with_n("last_observed_at_ms", latest)
                .with_s("last_received_at", rfc3339(now))
                .with_n(EXPIRES_AT, now.timestamp() + self.config.sources.observation_ttl.as_secs() as i64),
            cond: Some(Cond::Or(vec![Cond::NotExists, Cond::Lt("last_observed_at_ms".into(), latest + 1)])),
        };
        let mut ops = vec![
            WriteOp::Put { item: record, cond: Some(Cond::eq_s("status", "pending")) },
            WriteOp::Delete { key: pending_key(&s.source_id, probe_id), cond: Some(Cond::Exists) },
            WriteOp::Put { item: marker, cond: Some(Cond::NotExists) },
            a.still_admitted(epoch),
            health,
        ];
        let mut result = self.store.transact(ops.clone()).await;
        if let Err(e) = &result
            && failed(e, 4)
        {
            // A newer batch moved the marker past this answer: store the answer, keep it.
            ops.truncate(4);
            result = self.store.transact(ops).await;
        }
        match result {
            Ok(()) => Ok(ProbeAnswerReceipt {
                schema: PROBE_ANSWER_RECEIPT_SCHEMA,
                probe_id: probe_id.to_owned(),
                source_id: s.source_id.clone(),
                observation_ref: stored.observation_ref,
                accepted: true,
            }),
            Err(e) if failed(&e, 3) => Err(ApiError::ManifestNotRegistered),
            Err(e) if failed(&e, 0) => {
                let now = self.store.get(&key).await?;
                Err(match now.as_ref().and_then(|i| i.s("status")) {
                    Some("answered") => ApiError::ProbeNotPending { reason: "answered" },
                    _ => ApiError::ProbeNotPending { reason: "expired" },
                })
            }
            Err(e) if failed(&e, 1) => Err(ApiError::ProbeNotPending { reason: "expired" }),
            Err(e) if failed(&e, 2) => Err(ApiError::DuplicateObservation),
            // Contended by a concurrent write of the same probe: retryable.
            Err(e @ StoreError::TransactionCanceled { .. }) => Err(ApiError::Unavailable(Box::new(e))),
            Err(e) => Err(e.into()),
        }
    }
}
