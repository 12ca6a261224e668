//! A source's reports in the table: observations (TTL, exact provenance, a versioned
//! body), the request-identity markers that make a producer's request unique per source,
//! and the connection-health marker that only moves forward; the freshness-window read and
//! the one commit of a report. Must not depend on `http`, `mcp` or any use-case module.

use super::attrs::{LAST_OBSERVED_AT_MS, LAST_RECEIVED_AT, PROBE_ID, set_s, text};
use super::tx::{Role, Tx, TxFailure};
use super::{BODY, version};
use crate::domain::source::{ObservationKind, ObservationProvenance};
use crate::error::ApiError;
use crate::store::{Cond, EXPIRES_AT, Item, Key, Store, StoreError};

const OBSERVATION_PREFIX: &str = "OBS#";

/// The partition of a source's observations, request markers and health marker.
fn observations_pk(source_id: &str) -> String {
    format!("SRCOBS#{source_id}")
}
/// Observed-at (ms, zero-padded) then request identity, so a freshness window is one
/// range query.
fn observation_sk(observed_at_ms: i64, request_id: &str) -> String {
    format!("{OBSERVATION_PREFIX}{observed_at_ms:015}#{request_id}")
}
/// The request identity is unique per source, across observations and probe answers.
fn request_marker_key(source_id: &str, request_id: &str) -> Key {
    Key::new(observations_pk(source_id), format!("REQ#{request_id}"))
}
/// The last-report marker of a source (connection health, Device Check).
pub fn health_key(source_id: &str) -> Key {
    Key::new(observations_pk(source_id), "HEALTH")
}

/// The version of a stored observation body this code writes (the rule is
/// [`version`]'s: version 1, the flat shape, is written without the field).
pub const OBSERVATION_BODY_VERSION: u32 = version::FIRST;

/// One stored observation with its exact provenance. The provenance is the wire type,
/// flattened: the stored JSON keeps one flat object, and the executor's projection hands
/// the provenance on as it is.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredObservation {
    #[serde(default = "version::first", skip_serializing_if = "version::is_first")]
    pub schema_version: u32,
    pub observation_ref: String,
    pub credential_generation: u32,
    pub kind: ObservationKind,
    pub event: Option<String>,
    pub summary: String,
    pub data: serde_json::Map<String, serde_json::Value>,
    #[serde(flatten)]
    pub provenance: ObservationProvenance,
}

impl StoredObservation {
    pub fn to_body(&self) -> Result<String, ApiError> {
        serde_json::to_string(self).map_err(ApiError::internal)
    }

    pub fn from_body(body: &str) -> Result<Self, ApiError> {
        version::read(body)
    }

    /// The observation item (new) and its request-identity marker (new), both with TTL.
    pub fn put(&self, tx: &mut Tx, expires_at: i64) -> Result<(), ApiError> {
        let p = &self.provenance;
        let at = p.observed_at.timestamp_millis();
        let item = Item::new(observations_pk(&p.source_id), observation_sk(at, &p.request_id))
            .with_s(BODY, self.to_body()?)
            .with_n(EXPIRES_AT, expires_at);
        tx.put(Role::Observation, item, Cond::NotExists);
        put_request_marker(tx, &p.source_id, &p.request_id, expires_at, None);
        Ok(())
    }
}

/// Marks a producer's request identity as used (new; TTL), naming the probe it answered.
pub fn put_request_marker(tx: &mut Tx, source_id: &str, request_id: &str, expires_at: i64, probe_id: Option<&str>) {
    let key = request_marker_key(source_id, request_id);
    let mut item = Item::new(key.pk, key.sk).with_n(EXPIRES_AT, expires_at);
    set_s(&mut item, PROBE_ID, probe_id);
    tx.put(Role::RequestMarker, item, Cond::NotExists);
}

/// A request identity (or an observation) this source already used.
pub fn is_duplicate(f: &TxFailure) -> bool {
    f.failed(Role::Observation) || f.failed(Role::RequestMarker)
}

/// Page size and page bound of a freshness-window read.
const WINDOW_PAGE: usize = 100;
const MAX_WINDOW_PAGES: usize = 10;

/// The newest (at most `limit`) stored observations of a source observed at or after
/// `since_ms`, oldest first. The store reads ascending, so the window is paged through
/// (at most `MAX_WINDOW_PAGES` pages) keeping its tail.
pub async fn fresh_observations_of_source(
    store: &dyn Store,
    source_id: &str,
    since_ms: i64,
    limit: usize,
) -> Result<Vec<StoredObservation>, ApiError> {
    let mut after = observation_sk(since_ms, "");
    let pk = observations_pk(source_id);
    let mut tail: std::collections::VecDeque<Item> = std::collections::VecDeque::with_capacity(limit + 1);
    for _ in 0..MAX_WINDOW_PAGES {
        let page = store.query(&pk, OBSERVATION_PREFIX, Some(&after), WINDOW_PAGE).await?;
        if let Some(last) = page.items.last() {
            after = last.sk.clone();
        }
        for item in page.items {
            tail.push_back(item);
            if tail.len() > limit {
                tail.pop_front();
            }
        }
        if !page.has_more {
            break;
        }
    }
    tail.iter().map(|i| StoredObservation::from_body(i.s(BODY).unwrap_or_default())).collect()
}

// ---------- the health marker ----------

/// A source's last report: when its newest observation was observed and received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthMarker {
    pub last_observed_at_ms: i64,
    pub last_received_at: String,
    pub expires_at: i64,
}

impl HealthMarker {
    pub fn to_item(&self, source_id: &str) -> Item {
        let key = health_key(source_id);
        Item::new(key.pk, key.sk)
            .with_n(LAST_OBSERVED_AT_MS, self.last_observed_at_ms)
            .with_s(LAST_RECEIVED_AT, &self.last_received_at)
            .with_n(EXPIRES_AT, self.expires_at)
    }

    /// None when the item has no observed-at time.
    pub fn from_item(item: &Item) -> Option<Self> {
        Some(HealthMarker {
            last_observed_at_ms: item.n(LAST_OBSERVED_AT_MS)?,
            last_received_at: text(item, LAST_RECEIVED_AT),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        })
    }

    /// Puts the marker, moving it only forward: an older report than the marker leaves it.
    pub fn put_forward(&self, tx: &mut Tx, source_id: &str) {
        tx.put(Role::HealthMarker, self.to_item(source_id), moves_forward(self.last_observed_at_ms));
    }
}

/// The one rule of the health marker: written when absent or not newer than `observed_ms`.
fn moves_forward(observed_ms: i64) -> Cond {
    Cond::Or(vec![Cond::NotExists, Cond::Lt(LAST_OBSERVED_AT_MS.into(), observed_ms + 1)])
}

/// The health markers of `source_ids`, in order (one BatchGetItem; none for no sources).
pub async fn health_of_sources(
    store: &dyn Store,
    source_ids: &[&str],
) -> Result<Vec<Option<HealthMarker>>, StoreError> {
    if source_ids.is_empty() {
        return Ok(vec![]);
    }
    let keys: Vec<Key> = source_ids.iter().map(|id| health_key(id)).collect();
    Ok(store.batch_get(&keys).await?.iter().map(|i| i.as_ref().and_then(HealthMarker::from_item)).collect())
}

/// Commits a report (an observation batch or a probe answer). When the health marker's
/// condition is the only one that failed, a newer report already moved it: the same
/// transaction is committed again without it, so the report is stored and the newer
/// marker kept.
pub async fn commit_report(store: &dyn Store, mut tx: Tx) -> Result<(), TxFailure> {
    // The first attempt keeps a copy: a retry without the marker needs the rest.
    match tx.clone().commit(store).await {
        Err(f) if f.failed(Role::HealthMarker) && !refused_otherwise(&f) => {
            tx.without(Role::HealthMarker);
            tx.commit(store).await
        }
        other => other,
    }
}

/// A report's own actions whose refusal a second commit cannot change.
fn refused_otherwise(f: &TxFailure) -> bool {
    [Role::Source, Role::Observation, Role::RequestMarker, Role::Probe, Role::PendingProbe]
        .into_iter()
        .any(|r| f.failed(r))
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::store::embedded::EmbeddedStore;

    fn provenance(request_id: &str, observed_at: &str) -> ObservationProvenance {
        ObservationProvenance {
            source_id: "src_1".into(),
            room_id: "room_1".into(),
            world_id: "overworld".into(),
            adapter_profile: "minecraft".into(),
            adapter_version: "1.0.0".into(),
            adapter_hash: "a".into(),
            manifest_hash: "m".into(),
            producer_epoch: 2,
            request_id: request_id.into(),
            observed_at: observed_at.parse().unwrap(),
            received_at: observed_at.parse().unwrap(),
            probe_id: None,
        }
    }

    fn observation(request_id: &str, observed_at: &str) -> StoredObservation {
        StoredObservation {
            schema_version: OBSERVATION_BODY_VERSION,
            observation_ref: format!("obsv_{request_id}"),
            credential_generation: 1,
            kind: ObservationKind::Snapshot,
            event: None,
            summary: "s".into(),
            data: Default::default(),
            provenance: provenance(request_id, observed_at),
        }
    }

    /// Observations stored before the provenance was embedded are one flat object: the
    /// flattened type reads them, and writes the same shape back.
    #[test]
    fn a_stored_observation_keeps_its_flat_shape() {
        let flat = serde_json::json!({
            "observation_ref": "obsv_1", "source_id": "src_1", "room_id": "room_1",
            "world_id": "overworld", "adapter_profile": "minecraft", "adapter_version": "1.0.0",
            "adapter_hash": "a", "manifest_hash": "m", "producer_epoch": 2,
            "credential_generation": 3, "request_id": "req-0001", "kind": "snapshot",
            "event": null, "summary": "s", "data": {}, "observed_at": "2026-11-30T12:00:00Z",
            "received_at": "2026-11-30T12:00:01Z"
        });
        let stored: StoredObservation = serde_json::from_value(flat.clone()).unwrap();
        assert_eq!((stored.provenance.producer_epoch, stored.credential_generation), (2, 3));
        assert_eq!(stored.provenance.probe_id, None);
        let mut back = serde_json::to_value(&stored).unwrap();
        for t in ["observed_at", "received_at"] {
            let at: DateTime<Utc> = serde_json::from_value(back[t].clone()).unwrap();
            back[t] = serde_json::to_value(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap();
        }
        assert_eq!(back, flat);
    }

    #[test]
    fn a_body_without_a_version_is_version_one_and_a_later_version_is_written() {
        let o = observation("req-0001", "2026-11-30T12:00:00Z");
        let body = o.to_body().unwrap();
        assert!(!body.contains("schema_version"), "version 1 is the flat shape as it always was");
        assert_eq!(StoredObservation::from_body(&body).unwrap().schema_version, 1);
        let later = StoredObservation { schema_version: 2, ..o };
        let body = later.to_body().unwrap();
        assert!(body.contains("\"schema_version\":2"));
        assert_eq!(StoredObservation::from_body(&body).unwrap(), later);
    }

    #[test]
    fn the_health_marker_only_moves_forward() {
        let stored =
            |ms: i64| HealthMarker { last_observed_at_ms: ms, last_received_at: "t".into(), expires_at: i64::MAX };
        for (current, observed, moves) in [
            (None, 100, true),
            (Some(100), 101, true),
            (Some(100), 100, true),
            (Some(100), 99, false),
            (Some(100), 0, false),
        ] {
            let item = current.map(|ms| stored(ms).to_item("src_1"));
            assert_eq!(moves_forward(observed).holds(item.as_ref(), 0), moves, "{current:?} -> {observed}");
        }
    }

    #[test]
    fn observations_sort_by_observed_at_then_request_within_their_source() {
        let early = observation_sk(1_000, "b");
        assert!(early < observation_sk(1_000, "c") && early < observation_sk(2_000, "a"));
        assert!(observation_sk(999, "z") < early, "padded: 999 sorts before 1000");
        assert!(!request_marker_key("src_1", "a").sk.starts_with(OBSERVATION_PREFIX));
        assert!(!health_key("src_1").sk.starts_with(OBSERVATION_PREFIX));
    }

    async fn store() -> (tempfile::TempDir, EmbeddedStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap();
        (dir, store)
    }

    fn report(o: &StoredObservation, observed_ms: i64) -> Tx {
        let mut tx = Tx::new();
        let expires_at = crate::store::now_epoch() + 3600;
        o.put(&mut tx, expires_at).unwrap();
        HealthMarker { last_observed_at_ms: observed_ms, last_received_at: "t".into(), expires_at }
            .put_forward(&mut tx, "src_1");
        tx
    }

    #[tokio::test]
    async fn an_older_report_is_stored_and_the_newer_health_marker_kept() {
        let (_dir, store) = store().await;
        let newer = observation("req-0002", "2026-11-30T12:00:02Z");
        let older = observation("req-0001", "2026-11-30T12:00:01Z");
        commit_report(&store, report(&newer, 2_000)).await.unwrap();
        commit_report(&store, report(&older, 1_000)).await.unwrap();
        let health = health_of_sources(&store, &["src_1"]).await.unwrap();
        assert_eq!(health[0].as_ref().map(|h| h.last_observed_at_ms), Some(2_000));
        let since = older.provenance.observed_at.timestamp_millis();
        let fresh = fresh_observations_of_source(&store, "src_1", since, 10).await.unwrap();
        assert_eq!(fresh, vec![older, newer], "oldest first");
    }

    #[tokio::test]
    async fn a_used_request_identity_is_a_duplicate_whatever_the_health_marker() {
        let (_dir, store) = store().await;
        let first = observation("req-0001", "2026-11-30T12:00:02Z");
        commit_report(&store, report(&first, 2_000)).await.unwrap();
        for (observed_at, observed_ms) in [("2026-11-30T12:00:03Z", 3_000), ("2026-11-30T12:00:01Z", 1_000)] {
            let again = observation("req-0001", observed_at);
            let refused = commit_report(&store, report(&again, observed_ms)).await.unwrap_err();
            assert!(is_duplicate(&refused), "{observed_at}");
        }
    }

    #[tokio::test]
    async fn the_freshness_window_keeps_the_newest_within_its_limit() {
        let (_dir, store) = store().await;
        for s in 1..=5 {
            let o = observation(&format!("req-000{s}"), &format!("2026-11-30T12:00:0{s}Z"));
            commit_report(&store, report(&o, s * 1_000)).await.unwrap();
        }
        let since = observation("x", "2026-11-30T12:00:02Z").provenance.observed_at.timestamp_millis();
        let fresh = fresh_observations_of_source(&store, "src_1", since, 3).await.unwrap();
        let ids: Vec<&str> = fresh.iter().map(|o| o.provenance.request_id.as_str()).collect();
        assert_eq!(ids, ["req-0003", "req-0004", "req-0005"]);
        let fresh = fresh_observations_of_source(&store, "src_1", since, 10).await.unwrap();
        assert_eq!(fresh.len(), 4, "observed at or after the window's start");
    }
}
