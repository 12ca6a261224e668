//! Stored source-lane items written before the storage kernel held them (fixtures under
//! `fixtures/items/sources/`, captured from the service as it wrote them) are read by the
//! kernel's records and written back attribute for attribute; and, stored on the embedded
//! backend (and on DynamoDB when `HELIX_TEST_DYNAMODB_ENDPOINT` is set), come back through
//! the kernel's named reads.

mod support;

use std::collections::BTreeMap;

use helix_core::domain::source::{ObservationKind, ProbeStatus, SourceStatus};
use helix_core::service::records::observations::{
    HealthMarker, StoredObservation, fresh_observations_of_source, health_of_sources,
};
use helix_core::service::records::probes::{PendingProbe, ProbeRecord, pending_probes_of_source};
use helix_core::service::records::sources::{BearerLookup, Delivery, SourceRecord, sources_of_room};
use helix_core::store::{Attr, EXPIRES_AT, Item, Store, now_epoch};

const ROOM: &str = "room_a931b7fdcd52e8906986";
const SOURCE: &str = "src_ea2f33ffb1a92273cab7";

fn fixture(name: &str) -> Item {
    let path = format!("{}/tests/fixtures/items/sources/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let raw: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let attrs: BTreeMap<String, Attr> = serde_json::from_value(raw["attrs"].clone()).unwrap();
    Item { pk: raw["pk"].as_str().unwrap().to_owned(), sk: raw["sk"].as_str().unwrap().to_owned(), attrs }
}

const SOURCES: &[&str] = &["source_awaiting_claim", "source_active", "source_admitted", "source_revoked"];

#[test]
fn stored_sources_read_and_write_back_unchanged() {
    for name in SOURCES {
        let item = fixture(name);
        let source = SourceRecord::from_item(&item);
        assert_eq!(source.to_item(), item, "{name}");
        assert_eq!((source.room_id.as_str(), source.source_id.as_str()), (ROOM, SOURCE), "{name}");
    }
    let awaiting = SourceRecord::from_item(&fixture("source_awaiting_claim"));
    assert_eq!(
        (awaiting.status, awaiting.admitted, awaiting.bearer_hash.as_deref()),
        (SourceStatus::AwaitingClaim, None, None)
    );
    assert_eq!(awaiting.label.as_deref(), Some("Lab server"));
    let active = SourceRecord::from_item(&fixture("source_active"));
    assert_eq!((active.status, active.is_admitted(), active.generation), (SourceStatus::Active, false, 1));
    assert!(active.credential_live(active.credential_expires_at.unwrap() - 1));
    let admitted = SourceRecord::from_item(&fixture("source_admitted"));
    assert!(admitted.is_admitted());
    assert_eq!(admitted.producer_epoch, Some(1));
    assert!(admitted.manifest_hash.as_deref().is_some_and(|h| h.starts_with("sha256:")));
    let revoked = SourceRecord::from_item(&fixture("source_revoked"));
    assert_eq!(
        (revoked.status, revoked.bearer_hash.as_deref(), revoked.is_admitted()),
        (SourceStatus::Revoked, None, false)
    );
    assert!(revoked.revoked_at.is_some());
}

#[test]
fn stored_transitions_of_a_source_are_the_records_transitions() {
    let awaiting = SourceRecord::from_item(&fixture("source_awaiting_claim"));
    let active = SourceRecord::from_item(&fixture("source_active"));
    let admitted = SourceRecord::from_item(&fixture("source_admitted"));
    let revoked = SourceRecord::from_item(&fixture("source_revoked"));
    let claimed = awaiting.credentialed(
        active.bearer_hash.clone().unwrap(),
        1,
        active.credential_expires_at.unwrap(),
        active.credentialed_at.clone().unwrap(),
    );
    assert_eq!(claimed.to_item(), fixture("source_active"));
    let registered = active.registered(
        admitted.adapter_version.as_deref().unwrap(),
        admitted.adapter_hash.as_deref().unwrap(),
        admitted.manifest_hash.as_deref().unwrap(),
        1,
        admitted.registered_at.clone().unwrap(),
    );
    assert_eq!(registered.to_item(), fixture("source_admitted"));
    assert_eq!(admitted.revoked(revoked.revoked_at.clone().unwrap()).to_item(), fixture("source_revoked"));
}

#[test]
fn stored_deliveries_and_bearer_lookups_read_and_write_back_unchanged() {
    let item = fixture("delivery");
    let delivery = Delivery::from_item(&item);
    let hash = item.pk.strip_prefix("SRCCLAIM#").unwrap();
    assert_eq!(delivery.to_item(hash), item);
    assert_eq!((delivery.source_id.as_str(), delivery.generation), (SOURCE, 1));
    let item = fixture("bearer_lookup");
    let lookup = BearerLookup::from_item(&item);
    let hash = item.pk.strip_prefix("SRCBEARER#").unwrap();
    assert_eq!(lookup.to_item(hash), item);
    assert_eq!((lookup.room_id.as_str(), lookup.source_id.as_str()), (ROOM, SOURCE));
    assert_eq!(hash, SourceRecord::from_item(&fixture("source_active")).bearer_hash.unwrap());
}

#[test]
fn stored_observation_bodies_and_health_markers_read_and_write_back_unchanged() {
    let item = fixture("observation");
    let body = item.s("body").unwrap();
    let o = StoredObservation::from_body(body).unwrap();
    assert_eq!(o.to_body().unwrap(), body, "the flat body is written back as it was");
    assert_eq!((o.schema_version, o.kind, o.provenance.source_id.as_str()), (1, ObservationKind::Event, SOURCE));
    assert_eq!(o.provenance.probe_id, None);
    for name in ["health", "health_after_probe"] {
        let item = fixture(name);
        let h = HealthMarker::from_item(&item).unwrap();
        assert_eq!(h.to_item(SOURCE), item, "{name}");
    }
}

#[test]
fn stored_probes_and_pending_markers_read_and_write_back_unchanged() {
    for (name, status) in [
        ("probe_pending", ProbeStatus::Pending),
        ("probe_expired", ProbeStatus::Expired),
        ("probe_answered", ProbeStatus::Answered),
    ] {
        let item = fixture(name);
        let probe = ProbeRecord::from_item(&item).unwrap();
        assert_eq!(probe.to_item().unwrap(), item, "{name}");
        assert_eq!(probe.status, Some(status), "{name}");
        assert_eq!(probe.answer.is_some(), status == ProbeStatus::Answered, "{name}");
    }
    let pending = ProbeRecord::from_item(&fixture("probe_pending")).unwrap();
    assert_eq!(
        pending.pending().to_item(SOURCE),
        fixture("probe_pending_marker"),
        "the marker derives from the record"
    );
    let marker = PendingProbe::from_item(&fixture("probe_pending_marker"));
    assert_eq!(marker.to_item(SOURCE), fixture("probe_pending_marker"));
    let answered = ProbeRecord::from_item(&fixture("probe_answered")).unwrap();
    let answer = answered.answer.unwrap();
    assert_eq!(answer.provenance.probe_id.as_deref(), Some(answered.probe_id.as_str()));
    assert_eq!(answer.kind, ObservationKind::Snapshot);
}

/// Every fixture, its TTL moved past now: the store hides expired items, and the
/// fixtures were captured with the lifetimes of their day.
fn live_fixtures() -> Vec<Item> {
    let names = [
        "source_admitted",
        "delivery",
        "bearer_lookup",
        "observation",
        "request_marker",
        "request_marker_probe",
        "health",
        "probe_answered",
        "probe_pending_marker",
    ];
    names
        .iter()
        .map(|n| {
            let mut item = fixture(n);
            if item.n(EXPIRES_AT).is_some() {
                item.attrs.insert(EXPIRES_AT.into(), Attr::N(now_epoch() + 3600));
            }
            item
        })
        .collect()
}

async fn stored_items_come_back_through_the_kernel_reads(store: &dyn Store) {
    let items = live_fixtures();
    for item in &items {
        store.put(item.clone(), None).await.unwrap();
        assert_eq!(store.get(&item.key()).await.unwrap().as_ref(), Some(item), "{} {}", item.pk, item.sk);
    }
    let (sources, has_more) = sources_of_room(store, ROOM, 50).await.unwrap();
    assert_eq!((sources.len(), has_more), (1, false));
    assert_eq!(sources[0], SourceRecord::from_item(&fixture("source_admitted")));
    let observed = StoredObservation::from_body(fixture("observation").s("body").unwrap()).unwrap();
    let since = observed.provenance.observed_at.timestamp_millis() - 1_000;
    let fresh = fresh_observations_of_source(store, SOURCE, since, 10).await.unwrap();
    assert_eq!(fresh, vec![observed.clone()], "markers and the health marker are no observations");
    let later = observed.provenance.observed_at.timestamp_millis() + 1;
    assert!(fresh_observations_of_source(store, SOURCE, later, 10).await.unwrap().is_empty());
    let health = health_of_sources(store, &[SOURCE, "src_00000000000000000000"]).await.unwrap();
    assert_eq!(health.len(), 2);
    assert_eq!(health[0].as_ref().map(|h| h.last_observed_at_ms), fixture("health").n("last_observed_at_ms"));
    assert_eq!(health[1], None);
    let pending = pending_probes_of_source(store, SOURCE, 10).await.unwrap();
    let want = PendingProbe::from_item(&fixture("probe_pending_marker"));
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].probe_id.as_str(), pending[0].answer_until_ms),
        (want.probe_id.as_str(), want.answer_until_ms)
    );
}

#[tokio::test]
async fn stored_source_items_read_back_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = helix_core::store::embedded::EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap();
    stored_items_come_back_through_the_kernel_reads(&store).await;
}

#[tokio::test]
async fn stored_source_items_read_back_on_dynamodb() {
    let Some((client, store)) = support::dynamo::fresh_store().await else { return };
    stored_items_come_back_through_the_kernel_reads(&store).await;
    support::dynamo::drop_table(&client, &store).await;
}
