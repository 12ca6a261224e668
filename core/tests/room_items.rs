//! Room items written before a change are read after it: the captured items under
//! `fixtures/items/rooms/` go into a store as they are and come back through the storage
//! kernel's named reads and records, on the embedded backend and, when
//! `HELIX_TEST_DYNAMODB_ENDPOINT` is set, on DynamoDB. A record written again keeps every
//! attribute; a body is written back with the same fields and values (version 1 is
//! written without `schema_version`).

mod support;

use std::collections::BTreeMap;

use helix_core::domain::room::RoomRole;
use helix_core::service::records::answer_from_receipt;
use helix_core::service::records::rooms::{
    self as items, AccountRoom, Binding, BindingKind, BindingState, BindingTarget, Claim, Consent, LEGACY_TENANT,
    Membership, ObserverState, RoomStatus, RoomTenant, RunChatSlot, RunRoomSlot, Snapshot,
};
use helix_core::store::{Attr, EXPIRES_AT, Item, Store, embedded::EmbeddedStore, now_epoch};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Stored {
    pk: String,
    sk: String,
    attrs: BTreeMap<String, Attr>,
}

/// The captured items of one kind. Their TTLs are moved into the future: expiry is the
/// store's business, the shape is what is checked here.
fn fixture(kind: &str) -> Vec<Item> {
    let path = format!("{}/tests/fixtures/items/rooms/{kind}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let stored: Vec<Stored> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(!stored.is_empty(), "{path} holds no item");
    stored
        .into_iter()
        .map(|s| {
            let mut item = Item { pk: s.pk, sk: s.sk, attrs: s.attrs };
            if item.n(EXPIRES_AT).is_some() {
                item.attrs.insert(EXPIRES_AT.into(), Attr::N(LIVE_UNTIL));
            }
            item
        })
        .collect()
}

/// 2100-01-01: every captured TTL is moved here, so the items stay live.
const LIVE_UNTIL: i64 = 4_102_444_800;

const KINDS: &[&str] = &[
    "room",
    "membership",
    "consent",
    "account_room",
    "run_room_slot",
    "run_chat_slot",
    "binding",
    "claim",
    "invite",
    "observer",
    "snapshot",
    "room_create_receipt",
];

async fn load(store: &dyn Store) {
    for kind in KINDS {
        for item in fixture(kind) {
            store.put(item, None).await.unwrap();
        }
    }
}

/// Every attribute but the body is written back unchanged; the body keeps every field
/// and value and gains nothing: version 1 is written without `schema_version`.
fn same_item_and_body(written: &Item, stored: &Item) {
    let strip = |i: &Item| {
        let mut a = i.attrs.clone();
        a.remove("body");
        a
    };
    assert_eq!(strip(written), strip(stored), "{} {}", stored.pk, stored.sk);
    let body = |i: &Item| serde_json::from_str::<Value>(i.s("body").unwrap()).unwrap();
    let w = body(written);
    assert_eq!(w.get("schema_version"), None, "version 1 is written without the field");
    assert_eq!(w, body(stored), "{} {}", stored.pk, stored.sk);
}

fn legacy_tenant() -> RoomTenant {
    RoomTenant::of("https://issuer.example", LEGACY_TENANT)
}

fn other_tenant() -> RoomTenant {
    RoomTenant::of("https://issuer.example", "tenant-a")
}

async fn stored(store: &dyn Store, item: &Item) -> Item {
    store.get(&item.key()).await.unwrap().unwrap_or_else(|| panic!("{} {} not read back", item.pk, item.sk))
}

async fn check_rooms(store: &dyn Store) {
    for item in fixture("room") {
        let room_id = item.pk.trim_start_matches("ROOM#");
        let room = items::read_room(store, room_id).await.unwrap().expect("room");
        assert_eq!(room.status, RoomStatus::Active);
        assert_eq!(room.schema_version, 1, "a body without the field is version 1");
        assert_eq!(Some(room.consent_version as i64), item.n("consent_version"));
        assert_eq!(Some(room.owner_account.as_str()), item.s("owner_account"));
        // Stored before tenants were recorded: the development tenant's room, no one else's.
        assert_eq!(room.tenant_ref, None);
        assert!(legacy_tenant().admits(&room) && !other_tenant().admits(&room));
        same_item_and_body(&room.to_item().unwrap(), &stored(store, &item).await);
    }
    for item in fixture("membership") {
        let room_id = item.pk.trim_start_matches("ROOM#");
        let (members, _) = items::members_of_room(store, room_id, None, 100).await.unwrap();
        let m = members.iter().find(|m| item.sk.ends_with(&m.account_id)).expect("member listed");
        assert_eq!(m.role, if item.s("role") == Some("owner") { RoomRole::Owner } else { RoomRole::Member });
        assert!(m.consent_version >= 1);
        assert_eq!(m.to_item(), stored(store, &item).await);
        assert_eq!(Membership::from_item(&item), *m);
    }
    for item in fixture("consent") {
        let c = Consent::from_item(&stored(store, &item).await).unwrap();
        assert!(c.consent_receipt.starts_with("consent_"));
        assert_eq!(c.consent_receipt, Consent::receipt_ref(&c.room_id, &c.account_id, c.version));
        assert_eq!(c.to_item(), item);
    }
    for item in fixture("account_room") {
        let entry = AccountRoom::from_item(&item).unwrap();
        let (ids, _) = items::rooms_of_account(store, &entry.account_id, None, 50).await.unwrap();
        assert!(ids.contains(&entry.room_id));
        assert_eq!(entry.to_item(), stored(store, &item).await);
    }
    for item in fixture("invite") {
        let hash = item.pk.trim_start_matches("INVITE#");
        let invite = items::live_invite(store, hash, now_epoch()).await.unwrap().expect("live invite");
        assert_eq!(invite.to_item(), item);
    }
}

async fn check_bindings(store: &dyn Store) {
    for item in fixture("run_room_slot") {
        let slot = RunRoomSlot::from_item(&stored(store, &item).await).unwrap();
        assert!(slot.binding_ref.starts_with("rrb_"));
        assert_eq!(slot.to_item(), item);
    }
    for item in fixture("run_chat_slot") {
        let slot = RunChatSlot::from_item(&stored(store, &item).await).unwrap();
        assert!(slot.binding_ref.starts_with("rcb_"));
        assert_eq!(slot.to_item(), item);
    }
    let mut seen = vec![];
    for item in fixture("binding") {
        // The fixtures hold a binding before and after its revocation (one key): the store
        // keeps the last, and each captured shape decodes and re-encodes as it was.
        Binding::from_item(&stored(store, &item).await).unwrap();
        let b = Binding::from_item(&item).unwrap();
        assert_eq!(b.revoked_at.is_some(), b.state == BindingState::Revoked);
        match &b.target {
            BindingTarget::Room { consent_receipt, .. } => assert!(consent_receipt.starts_with("consent_")),
            BindingTarget::Chat { observer_ref } => assert!(observer_ref.starts_with("obs_")),
        }
        assert_eq!(b.to_item("any").attrs, item.attrs, "{}", item.pk);
        seen.push((b.kind(), b.state));
    }
    for want in [
        (BindingKind::RunRoom, BindingState::Active),
        (BindingKind::RunRoom, BindingState::Revoked),
        (BindingKind::RunChat, BindingState::Active),
        (BindingKind::RunChat, BindingState::Revoked),
    ] {
        assert!(seen.contains(&want), "the fixtures hold a {want:?} binding");
    }
}

async fn check_observers(store: &dyn Store) {
    let mut states = vec![];
    for item in fixture("observer") {
        let observer_ref = item.pk.trim_start_matches("OBS#");
        let obs = items::read_observer(store, observer_ref).await.unwrap().expect("observer");
        assert_eq!(obs.schema_version, 1);
        assert_eq!(obs.binding_ref.is_some(), obs.status == ObserverState::Bound);
        same_item_and_body(&obs.to_item().unwrap(), &item);
        states.push(obs.status);
    }
    for want in [ObserverState::AwaitingClaim, ObserverState::Bound, ObserverState::Disconnected] {
        assert!(states.contains(&want), "the fixtures hold a {want:?} observer");
    }
    for item in fixture("claim") {
        let (hash, account) = (item.pk.trim_start_matches("CLAIM#"), item.s("account_id").unwrap());
        let run = "run_00000000000000000000000000000000";
        let read = items::claim_reads(store, hash, account, &legacy_tenant(), run, now_epoch()).await.unwrap();
        let claim: Claim = read.claim.expect("the claim of its own account, in the development tenant");
        assert_eq!(claim.observer.status, ObserverState::AwaitingClaim);
        assert_eq!(claim.tenant_ref, None);
        same_item_and_body(&claim.to_item().unwrap(), &item);
        let (legacy, other) = (legacy_tenant(), other_tenant());
        let foreign = items::claim_reads(store, hash, "acct_x", &legacy, "run_x", now_epoch());
        assert!(foreign.await.unwrap().claim.is_none(), "another account's claim is not read");
        let elsewhere = items::claim_reads(store, hash, account, &other, run, now_epoch());
        assert!(elsewhere.await.unwrap().claim.is_none(), "nor the claim under another tenant");
    }
    for item in fixture("snapshot") {
        let snap = Snapshot::from_item(&stored(store, &item).await).unwrap();
        assert!(!snap.messages.is_empty());
        assert_eq!(snap.to_item().unwrap(), item);
    }
}

async fn check_receipts(store: &dyn Store) {
    for item in fixture("room_create_receipt") {
        let read = stored(store, &item).await;
        let hash = read.s("request_hash").unwrap().to_owned();
        let replay = answer_from_receipt(&read, &hash, now_epoch()).unwrap();
        assert!(replay.replayed);
        assert_eq!(replay.status, 201);
        assert_eq!(replay.body["schema"], "helix.room.v1");
    }
}

async fn check_all(store: &dyn Store) {
    load(store).await;
    check_rooms(store).await;
    check_bindings(store).await;
    check_observers(store).await;
    check_receipts(store).await;
}

#[tokio::test]
async fn stored_room_items_are_read_by_the_kernel_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap();
    check_all(&store).await;
}

#[tokio::test]
async fn stored_room_items_are_read_by_the_kernel_on_dynamodb() {
    let Some((client, store)) = support::dynamo::fresh_store().await else { return };
    check_all(&store).await;
    support::dynamo::drop_table(&client, &store).await;
}
