//! The store conformance suite: one set of behaviours every backend must show.
//! Backends' tests call `run_all` with a fresh, empty store (own table or data dir).

use super::{COUNT, CancelReason, Cond, EXPIRES_AT, Item, Key, Store, StoreError, WriteOp, now_epoch};

fn item(pk: &str, sk: &str, rev: i64) -> Item {
    Item::new(pk, sk).with_n("rev", rev).with_s("body", format!("{pk}/{sk}@{rev}"))
}

pub async fn run_all(store: &dyn Store) {
    conditional_create_admits_one_writer(store).await;
    compare_and_set_on_a_number_attribute(store).await;
    missing_lt_or_and_conditions(store).await;
    transaction_is_all_or_nothing_with_reasons(store).await;
    transaction_rejects_two_actions_on_one_item(store).await;
    delete_and_check_actions(store).await;
    query_pages_after_a_sort_key(store).await;
    expired_items_are_invisible_and_replaceable(store).await;
    batch_get_keeps_key_order(store).await;
    counters_add_one_atomically_and_restart_after_expiry(store).await;
}

pub async fn conditional_create_admits_one_writer(store: &dyn Store) {
    let key = Key::new("T#create", "A");
    store.put(item("T#create", "A", 1), Some(Cond::NotExists)).await.expect("first create");
    match store.put(item("T#create", "A", 9), Some(Cond::NotExists)).await {
        Err(StoreError::ConditionFailed { current: Some(current) }) => {
            assert_eq!(current.n("rev"), Some(1), "failure returns the stored item")
        }
        other => panic!("second create must fail with the stored item, got {other:?}"),
    }
    assert_eq!(store.get(&key).await.unwrap().unwrap().n("rev"), Some(1));
    assert_eq!(store.get(&Key::new("T#create", "missing")).await.unwrap(), None);
}

pub async fn compare_and_set_on_a_number_attribute(store: &dyn Store) {
    store.put(item("T#cas", "A", 1), None).await.unwrap();
    store.put(item("T#cas", "A", 2), Some(Cond::eq_n("rev", 1))).await.expect("cas from 1");
    let stale = store.put(item("T#cas", "A", 3), Some(Cond::eq_n("rev", 1))).await;
    assert!(matches!(stale, Err(StoreError::ConditionFailed { current: Some(ref c) }) if c.n("rev") == Some(2)));
    let absent = store.put(item("T#cas", "B", 1), Some(Cond::eq_n("rev", 0))).await;
    assert!(matches!(absent, Err(StoreError::ConditionFailed { current: None })), "{absent:?}");
    store.put(item("T#cas", "A", 3), Some(Cond::eq_s("body", "T#cas/A@2"))).await.expect("string cas");
}

pub async fn missing_lt_or_and_conditions(store: &dyn Store) {
    store.put(Item::new("T#cond", "A").with_n("lease", 100), None).await.unwrap();
    let free = Cond::Or(vec![Cond::Missing("claim".into()), Cond::Lt("lease".into(), 200)]);
    store
        .put(Item::new("T#cond", "A").with_n("lease", 500).with_s("claim", "x"), Some(free.clone()))
        .await
        .expect("missing claim admits");
    let taken = store.put(Item::new("T#cond", "A").with_n("lease", 900), Some(free.clone())).await;
    assert!(matches!(taken, Err(StoreError::ConditionFailed { .. })), "live claim refuses");
    let both = Cond::And(vec![Cond::Exists, Cond::Lt("lease".into(), 501), Cond::eq_s("claim", "x")]);
    store.put(Item::new("T#cond", "A").with_n("lease", 1), Some(both)).await.expect("and holds");
    let on_absent = store.put(Item::new("T#cond", "Z"), Some(Cond::Lt("lease".into(), 5))).await;
    assert!(matches!(on_absent, Err(StoreError::ConditionFailed { current: None })));
}

pub async fn transaction_is_all_or_nothing_with_reasons(store: &dyn Store) {
    store.put(item("T#tx", "RUN", 1), None).await.unwrap();
    store.put(item("T#tx", "IDEM", 1), None).await.unwrap();
    let ops = vec![
        WriteOp::Put { item: item("T#tx", "RUN", 2), cond: Some(Cond::eq_n("rev", 1)) },
        WriteOp::Put { item: item("T#tx", "EVT#1", 1), cond: Some(Cond::NotExists) },
        WriteOp::Put { item: item("T#tx", "IDEM", 2), cond: Some(Cond::NotExists) },
    ];
    match store.transact(ops).await {
        Err(StoreError::TransactionCanceled { reasons }) => {
            assert_eq!(reasons.len(), 3);
            assert_eq!(reasons[0], CancelReason::None);
            assert_eq!(reasons[1], CancelReason::None);
            match &reasons[2] {
                CancelReason::ConditionFailed { current: Some(c) } => assert_eq!(c.n("rev"), Some(1)),
                other => panic!("third action's reason must carry the stored item, got {other:?}"),
            }
        }
        other => panic!("expected cancellation, got {other:?}"),
    }
    assert_eq!(store.get(&Key::new("T#tx", "RUN")).await.unwrap().unwrap().n("rev"), Some(1), "nothing written");
    assert_eq!(store.get(&Key::new("T#tx", "EVT#1")).await.unwrap(), None, "nothing written");
    store
        .transact(vec![
            WriteOp::Put { item: item("T#tx", "RUN", 2), cond: Some(Cond::eq_n("rev", 1)) },
            WriteOp::Put { item: item("T#tx", "EVT#1", 1), cond: Some(Cond::NotExists) },
        ])
        .await
        .expect("both conditions hold");
    assert_eq!(store.get(&Key::new("T#tx", "RUN")).await.unwrap().unwrap().n("rev"), Some(2));
    assert!(store.get(&Key::new("T#tx", "EVT#1")).await.unwrap().is_some());
}

pub async fn transaction_rejects_two_actions_on_one_item(store: &dyn Store) {
    let ops = vec![
        WriteOp::Put { item: item("T#dup", "A", 1), cond: None },
        WriteOp::Check { key: Key::new("T#dup", "A"), cond: Cond::NotExists },
    ];
    assert!(matches!(store.transact(ops).await, Err(StoreError::Invalid(_))));
    assert_eq!(store.get(&Key::new("T#dup", "A")).await.unwrap(), None);
}

pub async fn delete_and_check_actions(store: &dyn Store) {
    store.put(item("T#del", "A", 1), None).await.unwrap();
    store.put(item("T#del", "GUARD", 7), None).await.unwrap();
    let refused = store
        .transact(vec![
            WriteOp::Delete { key: Key::new("T#del", "A"), cond: Some(Cond::Exists) },
            WriteOp::Check { key: Key::new("T#del", "GUARD"), cond: Cond::eq_n("rev", 8) },
        ])
        .await;
    assert!(matches!(refused, Err(StoreError::TransactionCanceled { .. })));
    assert!(store.get(&Key::new("T#del", "A")).await.unwrap().is_some(), "delete rolled back");
    store
        .transact(vec![
            WriteOp::Delete { key: Key::new("T#del", "A"), cond: Some(Cond::Exists) },
            WriteOp::Check { key: Key::new("T#del", "GUARD"), cond: Cond::eq_n("rev", 7) },
        ])
        .await
        .expect("check holds");
    assert_eq!(store.get(&Key::new("T#del", "A")).await.unwrap(), None);
}

pub async fn query_pages_after_a_sort_key(store: &dyn Store) {
    for seq in 1..=7 {
        store.put(item("T#q", &format!("EVT#{seq:010}"), seq), None).await.unwrap();
    }
    store.put(item("T#q", "RUN", 1), None).await.unwrap();
    store.put(item("T#q2", "EVT#0000000001", 1), None).await.unwrap();
    let first = store.query("T#q", "EVT#", None, 3).await.unwrap();
    let revs: Vec<_> = first.items.iter().map(|i| i.n("rev").unwrap()).collect();
    assert_eq!(revs, vec![1, 2, 3]);
    assert!(first.has_more);
    let after = first.items.last().unwrap().sk.clone();
    let rest = store.query("T#q", "EVT#", Some(&after), 10).await.unwrap();
    let revs: Vec<_> = rest.items.iter().map(|i| i.n("rev").unwrap()).collect();
    assert_eq!(revs, vec![4, 5, 6, 7]);
    assert!(!rest.has_more);
    let exact = store.query("T#q", "EVT#", Some(&format!("EVT#{:010}", 4)), 3).await.unwrap();
    assert_eq!(exact.items.len(), 3);
    assert!(!exact.has_more, "exactly the remaining three");
    assert!(store.query("T#none", "EVT#", None, 5).await.unwrap().items.is_empty());
}

pub async fn expired_items_are_invisible_and_replaceable(store: &dyn Store) {
    let past = now_epoch() - 10;
    let future = now_epoch() + 3600;
    store.put(item("T#ttl", "OLD", 1).with_n(EXPIRES_AT, past), None).await.unwrap();
    store.put(item("T#ttl", "NEW", 1).with_n(EXPIRES_AT, future), None).await.unwrap();
    assert_eq!(store.get(&Key::new("T#ttl", "OLD")).await.unwrap(), None, "expired is unseen");
    assert!(store.get(&Key::new("T#ttl", "NEW")).await.unwrap().is_some());
    let page = store.query("T#ttl", "", None, 10).await.unwrap();
    assert_eq!(page.items.len(), 1);
    store
        .put(item("T#ttl", "OLD", 2).with_n(EXPIRES_AT, future), Some(Cond::NotExists))
        .await
        .expect("an expired item counts as absent");
    let live = store.put(item("T#ttl", "NEW", 2), Some(Cond::NotExists)).await;
    assert!(matches!(live, Err(StoreError::ConditionFailed { .. })));
}

pub async fn batch_get_keeps_key_order(store: &dyn Store) {
    store.put(item("T#bg", "A", 1), None).await.unwrap();
    store.put(item("T#bg", "C", 3), None).await.unwrap();
    let got = store.batch_get(&[Key::new("T#bg", "C"), Key::new("T#bg", "B"), Key::new("T#bg", "A")]).await.unwrap();
    let revs: Vec<_> = got.iter().map(|i| i.as_ref().and_then(|i| i.n("rev"))).collect();
    assert_eq!(revs, vec![Some(3), None, Some(1)]);
}

pub async fn counters_add_one_atomically_and_restart_after_expiry(store: &dyn Store) {
    let key = Key::new("T#count", "RL");
    let expires_at = now_epoch() + 120;
    assert_eq!(store.count(&key, expires_at).await.unwrap(), 1, "a new counter starts at 1");
    assert_eq!(store.count(&key, expires_at + 999).await.unwrap(), 2);
    let stored = store.get(&key).await.unwrap().expect("the counter is an item");
    assert_eq!(stored.n(COUNT), Some(2));
    assert_eq!(stored.n(EXPIRES_AT), Some(expires_at), "a live counter keeps its first expiry");

    let contended = Key::new("T#count", "CONTENDED");
    let mut seen: Vec<i64> = futures::future::join_all((0..8).map(|_| store.count(&contended, expires_at)))
        .await
        .into_iter()
        .map(|r| r.expect("count"))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=8).collect::<Vec<_>>(), "concurrent adds each see a distinct value");

    let old = Key::new("T#count", "OLD");
    store.put(Item::new("T#count", "OLD").with_n(COUNT, 50).with_n(EXPIRES_AT, now_epoch() - 5), None).await.unwrap();
    assert_eq!(store.count(&old, expires_at).await.unwrap(), 1, "an expired counter restarts");
    assert_eq!(store.get(&old).await.unwrap().unwrap().n(EXPIRES_AT), Some(expires_at));
}
