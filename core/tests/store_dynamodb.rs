//! The conformance suite on the DynamoDB backend, against a DynamoDB-compatible server on
//! `HELIX_TEST_DYNAMODB_ENDPOINT` (e.g. `moto_server -H 127.0.0.1 -p 5055`). Each test uses its
//! own table. Without the endpoint these tests fail, unless `HELIX_TEST_SKIP_DYNAMODB=1` says
//! to skip them on purpose: CI can never skip them silently.

use helix_core::store::dynamo::DynamoStore;
use helix_core::store::{
    CancelReason, Cond, EXPIRES_AT, Item, Key, Store, StoreError, WriteOp, conformance, now_epoch,
};

mod support;

use support::dynamo::{RoundTrips, client_counting, drop_table, fresh_store};

#[tokio::test]
async fn dynamo_store_passes_the_conformance_suite() {
    let Some((client, store)) = fresh_store().await else {
        return;
    };
    conformance::run_all(&store).await;
    drop_table(&client, &store).await;
}

#[tokio::test]
async fn create_table_is_idempotent() {
    let Some((client, store)) = fresh_store().await else {
        return;
    };
    store.put(Item::new("T#idem", "A").with_n("rev", 1), None).await.unwrap();
    store.create_table().await.expect("second create_table on an existing table");
    DynamoStore::new(client.clone(), store.table()).create_table().await.expect("from another handle");
    let ttl = client.describe_time_to_live().table_name(store.table()).send().await.unwrap();
    let desc = ttl.time_to_live_description().expect("ttl description");
    assert_eq!(desc.attribute_name(), Some(EXPIRES_AT));
    let item = store.get(&Key::new("T#idem", "A")).await.unwrap();
    assert_eq!(item.and_then(|i| i.n("rev")), Some(1), "existing items survive");
    drop_table(&client, &store).await;
}

/// Paths the shared suite does not reach but this backend handles on its own: cursors the
/// server must not see, duplicate and >100 keys in batch_get, expired runs longer than a page.
#[tokio::test]
async fn dynamo_specific_edges() {
    let Some((client, store)) = fresh_store().await else {
        return;
    };
    for sk in ["A", "EVT#1", "EVT#3", "EVT#5", "Z"] {
        store.put(Item::new("T#edge", sk).with_s("sk_copy", sk), None).await.unwrap();
    }
    let sks = |page: &helix_core::store::Page| page.items.iter().map(|i| i.sk.clone()).collect::<Vec<_>>();
    // A cursor that is not an item, inside the prefix range.
    let page = store.query("T#edge", "EVT#", Some("EVT#2"), 10).await.unwrap();
    assert_eq!(sks(&page), ["EVT#3", "EVT#5"]);
    // Cursors below and above the prefix range (DynamoDB would refuse them as ExclusiveStartKey).
    let page = store.query("T#edge", "EVT#", Some("B"), 1).await.unwrap();
    assert_eq!((sks(&page), page.has_more), (vec!["EVT#1".to_owned()], true));
    let page = store.query("T#edge", "EVT#", Some("F"), 10).await.unwrap();
    assert!(page.items.is_empty() && !page.has_more);
    let page = store.query("T#edge", "", Some("EVT#5"), 10).await.unwrap();
    assert_eq!(sks(&page), ["Z"]);
    let page = store.query("T#edge", "", None, 0).await.unwrap();
    assert!(page.items.is_empty() && page.has_more, "limit 0 still tells whether there is more");

    // Many expired items before and between live ones: paging continues past them.
    let past = now_epoch() - 60;
    for i in 0..12 {
        store.put(Item::new("T#exp", format!("E#{i:02}")).with_n(EXPIRES_AT, past), None).await.unwrap();
    }
    store.put(Item::new("T#exp", "E#05x"), None).await.unwrap();
    store.put(Item::new("T#exp", "E#99"), None).await.unwrap();
    let page = store.query("T#exp", "E#", None, 1).await.unwrap();
    assert_eq!((sks(&page), page.has_more), (vec!["E#05x".to_owned()], true));
    let page = store.query("T#exp", "E#", Some("E#05x"), 1).await.unwrap();
    assert_eq!((sks(&page), page.has_more), (vec!["E#99".to_owned()], false));

    // batch_get: duplicates, more than 100 keys, empty keys, expired items.
    let mut keys: Vec<Key> = (0..120).map(|i| Key::new("T#bg", format!("K{i:03}"))).collect();
    store.put(Item::new("T#bg", "K007").with_n("rev", 7), None).await.unwrap();
    store.put(Item::new("T#bg", "K110").with_n("rev", 110), None).await.unwrap();
    keys.extend([Key::new("T#bg", "K007"), Key::new("", "x"), Key::new("T#exp", "E#00")]);
    let got = store.batch_get(&keys).await.unwrap();
    assert_eq!(got.len(), keys.len());
    let revs: Vec<(usize, i64)> =
        got.iter().enumerate().filter_map(|(i, g)| g.as_ref().map(|g| (i, g.n("rev").unwrap()))).collect();
    assert_eq!(revs, [(7, 7), (110, 110), (120, 7)]);
    assert!(store.batch_get(&[]).await.unwrap().is_empty());

    // Shapes DynamoDB cannot store are refused before any round trip.
    let bad = store.put(Item::new("T#bad", "A").with_s("pk", "other"), None).await;
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    let bad = store.transact(vec![WriteOp::Put { item: Item::new("T#bad", "A").with_n("sk", 1), cond: None }]).await;
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    assert_eq!(store.get(&Key::new("", "")).await.unwrap(), None);

    // An expired item is `current: None` in a failed condition, in put and in transact.
    store.put(Item::new("T#gone", "A").with_n("rev", 1).with_n(EXPIRES_AT, past), None).await.unwrap();
    let failed = store.put(Item::new("T#gone", "A"), Some(Cond::eq_n("rev", 1))).await;
    assert!(matches!(failed, Err(StoreError::ConditionFailed { current: None })), "{failed:?}");
    let failed = store
        .transact(vec![
            WriteOp::Check { key: Key::new("T#gone", "A"), cond: Cond::Exists },
            WriteOp::Delete { key: Key::new("T#edge", "A"), cond: None },
        ])
        .await;
    match failed {
        Err(StoreError::TransactionCanceled { reasons }) => {
            assert_eq!(reasons, [CancelReason::ConditionFailed { current: None }, CancelReason::None])
        }
        other => panic!("expected cancellation, got {other:?}"),
    }
    // Lt on a string attribute is false (not a server error), and Missing holds on expired items.
    store.put(Item::new("T#lt", "A").with_s("lease", "soon"), None).await.unwrap();
    let lt = store.put(Item::new("T#lt", "A"), Some(Cond::Lt("lease".into(), 5))).await;
    assert!(matches!(lt, Err(StoreError::ConditionFailed { current: Some(_) })), "{lt:?}");
    store.put(Item::new("T#gone", "A").with_s("claim", "x"), Some(Cond::Missing("rev".into()))).await.unwrap();
    drop_table(&client, &store).await;
}

#[tokio::test]
async fn sdk_failures_keep_their_source() {
    let Some((client, store)) = fresh_store().await else {
        return;
    };
    drop_table(&client, &store).await;
    match store.get(&Key::new("T#x", "A")).await {
        Err(err @ StoreError::Internal(_)) => {
            let source = std::error::Error::source(&err).expect("the SDK error is the source");
            assert!(format!("{source:?}").contains("ResourceNotFound"), "{source:?}");
        }
        other => panic!("a missing table is an internal failure, got {other:?}"),
    }
}

/// Every Store operation is one request in the common case (the design counts round trips).
#[tokio::test]
async fn round_trips_per_operation() {
    let calls = RoundTrips::default();
    let Some(client) = client_counting(Some(calls.clone())) else {
        return;
    };
    let store = DynamoStore::new(client.clone(), format!("helix-test-{}", uuid::Uuid::new_v4()));
    store.create_table().await.expect("create table");
    calls.take();
    let one = |op: &str| vec![op.to_owned()];

    store.put(Item::new("T#rt", "A").with_n("rev", 1), Some(Cond::NotExists)).await.unwrap();
    assert_eq!(calls.take(), one("PutItem"));
    let failed = store.put(Item::new("T#rt", "A"), Some(Cond::NotExists)).await;
    assert!(matches!(failed, Err(StoreError::ConditionFailed { current: Some(_) })));
    assert_eq!(calls.take(), one("PutItem"), "the stored item comes with the failure");
    store.get(&Key::new("T#rt", "A")).await.unwrap();
    assert_eq!(calls.take(), one("GetItem"));
    let keys: Vec<Key> = (0..100).map(|i| Key::new("T#rt", format!("K{i}"))).collect();
    store.batch_get(&keys).await.unwrap();
    assert_eq!(calls.take(), one("BatchGetItem"));
    let ops = |rev: i64| {
        vec![
            WriteOp::Put { item: Item::new("T#rt", "A").with_n("rev", rev + 1), cond: Some(Cond::eq_n("rev", rev)) },
            WriteOp::Put { item: Item::new("T#rt", format!("EVT#{rev}")), cond: Some(Cond::NotExists) },
        ]
    };
    store.transact(ops(1)).await.unwrap();
    assert_eq!(calls.take(), one("TransactWriteItems"));
    assert!(matches!(store.transact(ops(1)).await, Err(StoreError::TransactionCanceled { .. })));
    assert_eq!(calls.take(), one("TransactWriteItems"), "reasons come with the cancellation");
    assert!(matches!(store.transact(vec![]).await, Err(StoreError::Invalid(_))));
    assert!(calls.take().is_empty(), "shape errors need no round trip");
    let page = store.query("T#rt", "EVT#", None, 1).await.unwrap();
    assert!(page.items.len() == 1 && !page.has_more);
    assert_eq!(calls.take(), one("Query"));
    let counter = Key::new("RL#rt#1", "RL");
    assert_eq!(store.count(&counter, now_epoch() + 120).await.unwrap(), 1);
    assert_eq!(store.count(&counter, now_epoch() + 120).await.unwrap(), 2);
    assert_eq!(calls.take(), ["UpdateItem", "UpdateItem"], "a count is one UpdateItem");
    store.put(Item::new("RL#rt#0", "RL").with_n("count", 9).with_n(EXPIRES_AT, now_epoch() - 1), None).await.unwrap();
    calls.take();
    assert_eq!(store.count(&Key::new("RL#rt#0", "RL"), now_epoch() + 120).await.unwrap(), 1);
    assert_eq!(calls.take(), ["UpdateItem", "PutItem"], "an expired counter is replaced");
    drop_table(&client, &store).await;
}
