//! The conformance suite on the embedded backend, plus durability across reopen.

use helix_core::store::{Item, Key, Store, conformance, embedded::EmbeddedStore};

#[tokio::test]
async fn embedded_store_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&dir.path().join("helix.redb")).unwrap();
    conformance::run_all(&store).await;
}

#[tokio::test]
async fn embedded_store_keeps_items_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("helix.redb");
    {
        let store = EmbeddedStore::open(&path).unwrap();
        store.put(Item::new("RUN#a", "RUN").with_n("rev", 4), None).await.unwrap();
    }
    let reopened = EmbeddedStore::open(&path).unwrap();
    let got = reopened.get(&Key::new("RUN#a", "RUN")).await.unwrap().unwrap();
    assert_eq!(got.n("rev"), Some(4));
}
