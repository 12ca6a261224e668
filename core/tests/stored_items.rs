//! Items written before the storage kernel (`tests/fixtures/items/`) still read after it:
//! each fixture goes through a store and comes back, the kernel decodes it, and encoding
//! the decoded record gives the same item again (so a rewrite keeps the stored shape).
//! Runs on the embedded store, and on DynamoDB when `HELIX_TEST_DYNAMODB_ENDPOINT` is set.

mod support;

use std::collections::BTreeMap;

use helix_core::domain::account::IntentPurpose;
use helix_core::service::records::accounts::{AccountRecord, BindingEntry, BindingRecord, BindingStatus, LinkRecord};
use helix_core::service::records::runs::{event_from_item, event_item, is_owned_by, run_from_item, run_item};
use helix_core::service::records::sessions::{IntentRecord, SessionRecord};
use helix_core::service::records::{Receipt, ReceiptState};
use helix_core::store::embedded::EmbeddedStore;
use helix_core::store::{Attr, EXPIRES_AT, Item, Store, now_epoch};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/items");
/// The subject and provider the account fixtures were captured for.
const PROVIDER: &str = "helix-local";
const SUBJECT: &str = "alice";

#[derive(serde::Deserialize)]
struct StoredItem {
    pk: String,
    sk: String,
    attrs: BTreeMap<String, Attr>,
}

fn fixture(name: &str) -> Item {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}.json")).expect("fixture file");
    let s: StoredItem = serde_json::from_str(&text).expect("fixture JSON");
    Item { pk: s.pk, sk: s.sk, attrs: s.attrs }
}

/// The variable part of a key (`ACCOUNT#<id>` -> `<id>`).
fn after<'a>(key: &'a str, prefix: &str) -> &'a str {
    key.strip_prefix(prefix).expect("key prefix")
}

/// Decodes a fixture, checks what it says, and returns the item its record encodes.
type Check = fn(&Item) -> Item;

/// Every fixture with its check.
fn checks() -> Vec<(&'static str, Check)> {
    vec![
        ("run_started", |i| {
            let run = run_from_item(i).unwrap();
            assert_eq!((run.version, run.rev, run.last_seq), (1, 1, 1));
            assert!(run.claim.is_none());
            assert!(is_owned_by(i, &run.owner_hash));
            run_item(&run).unwrap()
        }),
        ("run_continued", |i| {
            let run = run_from_item(i).unwrap();
            assert_eq!((run.version, run.rev, run.last_seq, run.budget.steps_used), (2, 3, 4, 1));
            assert!(is_owned_by(i, &run.owner_hash) && !is_owned_by(i, "someone else"));
            run_item(&run).unwrap()
        }),
        ("event_1", event),
        ("event_2", event),
        ("event_3", event),
        ("event_4", event),
        ("receipt_completed", |i| {
            let r = Receipt::from_item(i).unwrap();
            assert!(matches!(&r.state, ReceiptState::Completed { status: 201, body } if body.contains("run_id")));
            assert!(r.run_id.is_some());
            r.to_item(&i.key())
        }),
        ("receipt_continued", |i| {
            let r = Receipt::from_item(i).unwrap();
            assert!(matches!(r.state, ReceiptState::Completed { status: 200, .. }));
            assert!(r.lease_until > 0);
            r.to_item(&i.key())
        }),
        ("receipt_in_progress", |i| {
            let r = Receipt::from_item(i).unwrap();
            assert_eq!(r.state, ReceiptState::InProgress { claim_token: "c0ffee".into() });
            r.to_item(&i.key())
        }),
        ("link", |i| {
            let l = LinkRecord::from_item(i);
            assert!(l.linked_account().is_some_and(|a| a.starts_with("acct_")));
            l.to_item(PROVIDER, SUBJECT)
        }),
        ("account", |i| {
            let a = AccountRecord::from_item(i);
            assert!(a.is_active());
            assert!(!a.policy.rooms_locked && !a.policy.developer && !a.policy.guest);
            assert!(a.policy.denied_capabilities.is_empty());
            a.to_item(after(&i.pk, "ACCOUNT#"))
        }),
        ("account_with_policy", |i| {
            let a = AccountRecord::from_item(i);
            assert!(a.is_active() && a.policy.rooms_locked && !a.policy.guest);
            assert_eq!(a.policy.denied_capabilities, ["a", "b"]);
            a.to_item(after(&i.pk, "ACCOUNT#"))
        }),
        ("binding_active", |i| {
            let b = BindingRecord::from_item(i);
            assert!(b.is_active() && b.generation.is_some() && b.revoked_at.is_none());
            b.to_item(after(&i.pk, "AGENTBIND#"))
        }),
        ("binding_revoked", |i| {
            let b = BindingRecord::from_item(i);
            assert_eq!(b.status, BindingStatus::Revoked);
            assert!(b.revoked_at.is_some());
            b.to_item(after(&i.pk, "AGENTBIND#"))
        }),
        ("binding_legacy", |i| {
            let b = BindingRecord::from_item(i);
            assert!(b.is_active() && b.generation.is_none() && b.updated_at.is_none());
            b.to_item(after(&i.pk, "AGENTBIND#"))
        }),
        ("binding_entry_active", |i| {
            let e = BindingEntry::from_item(i);
            assert_eq!(e.status, BindingStatus::Active);
            assert!(e.binding_ref.starts_with("agent-binding:sha256:") && e.revoked_at.is_none());
            assert_eq!(e.identity_hash, after(&i.sk, "AGENTBIND#"));
            e.to_item(after(&i.pk, "ACCOUNT#"))
        }),
        ("binding_entry_revoked", |i| {
            let e = BindingEntry::from_item(i);
            assert_eq!(e.status, BindingStatus::Revoked);
            assert_eq!(e.revoked_at.as_deref(), Some(e.updated_at.as_str()));
            e.to_item(after(&i.pk, "ACCOUNT#"))
        }),
        ("session", |i| {
            let s = SessionRecord::from_item(i).expect("a session with an account");
            assert!(s.account_id.starts_with("acct_"));
            assert!(s.created_at == s.refreshed_at && s.absolute_until > s.created_at);
            assert_eq!(s.tenant_ref, None, "stored before tenants were recorded");
            s.to_item(after(&i.pk, "SESSION#"))
        }),
        ("intent", |i| {
            let intent = IntentRecord::from_item(i).expect("an intent with a known purpose");
            assert_eq!(intent.purpose, IntentPurpose::AllowAgents);
            assert!(intent.session_hash.is_some() && !intent.browser_hash.is_empty());
            intent.to_item(after(&i.pk, "INTENT#"))
        }),
    ]
}

fn event(i: &Item) -> Item {
    let e = event_from_item(i).unwrap();
    assert_eq!(i.sk, format!("EVT#{:020}", e.seq));
    event_item(&e).unwrap()
}

/// A TTL in the past would make the item invisible: the store round trip moves it a day
/// past now, keeping everything else as captured.
fn live(mut item: Item) -> Item {
    if item.n(EXPIRES_AT).is_some() {
        item.attrs.insert(EXPIRES_AT.into(), Attr::N(now_epoch() + 86_400));
    }
    item
}

async fn every_fixture_reads_back_through(store: &dyn Store) {
    for (name, check) in checks() {
        let captured = live(fixture(name));
        store.put(captured.clone(), None).await.unwrap();
        let read = store.get(&captured.key()).await.unwrap().unwrap_or_else(|| panic!("{name}: stored"));
        assert_eq!(read, captured, "{name}: the store keeps the item as written");
        assert_eq!(check(&read), captured, "{name}: the record encodes the same item again");
    }
}

#[test]
fn every_fixture_file_is_checked() {
    let mut files: Vec<String> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok()?.strip_suffix(".json").map(str::to_owned))
        .collect();
    files.sort();
    let mut checked: Vec<String> = checks().iter().map(|(n, _)| n.to_string()).collect();
    checked.sort();
    assert_eq!(files, checked);
}

#[tokio::test]
async fn fixtures_read_back_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap();
    every_fixture_reads_back_through(&store).await;
}

#[cfg(feature = "dynamodb")]
#[tokio::test]
async fn fixtures_read_back_on_dynamodb() {
    let Some((client, store)) = support::dynamo::fresh_store().await else { return };
    every_fixture_reads_back_through(&store).await;
    support::dynamo::drop_table(&client, &store).await;
}
