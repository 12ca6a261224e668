//! Embedded, durable backend for the local server: one redb file in the data dir.
//! Same semantics as DynamoDB (conditions, all-or-nothing transactions, TTL on read);
//! must not be used by the Lambda functions.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{
    Attr, COUNT, CancelReason, Cond, EXPIRES_AT, Item, Key, Page, Store, StoreError, WriteOp, check_transaction,
    now_epoch,
};

/// The one table of the file (named on the store's trace spans).
const ITEMS_TABLE: &str = "items";
const ITEMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new(ITEMS_TABLE);

#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
}

impl EmbeddedStore {
    /// Opens (or creates) the store file at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::create(path).map_err(internal)?;
        let tx = db.begin_write().map_err(internal)?;
        tx.open_table(ITEMS).map_err(internal)?;
        tx.commit().map_err(internal)?;
        Ok(Self { db: Arc::new(db) })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db)).await.map_err(internal)?
    }
}

fn internal(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Internal(Box::new(e))
}

fn encode(item: &Item) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(&item.attrs).map_err(internal)
}

fn decode(key: &Key, bytes: &[u8]) -> Result<Item, StoreError> {
    let attrs: BTreeMap<String, Attr> = serde_json::from_slice(bytes).map_err(internal)?;
    Ok(Item { pk: key.pk.clone(), sk: key.sk.clone(), attrs })
}

fn read_item(
    table: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    key: &Key,
) -> Result<Option<Item>, StoreError> {
    match table.get((key.pk.as_str(), key.sk.as_str())).map_err(internal)? {
        Some(v) => decode(key, v.value()).map(Some),
        None => Ok(None),
    }
}

fn live(item: Option<Item>, now: i64) -> Option<Item> {
    item.filter(|i| !i.is_expired(now))
}

#[async_trait]
impl Store for EmbeddedStore {
    #[tracing::instrument(target = "helix_core::store::spans", name = "redb.get", skip_all, fields(otel.kind = "client", db.system.name = "redb", db.operation.name = "get", db.collection.name = ITEMS_TABLE))]
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        Ok(self.batch_get(std::slice::from_ref(key)).await?.pop().flatten())
    }

    /// Runs on the calling task: a redb read transaction never waits for a writer and
    /// reads a few keys in microseconds, less than a hand-off to the blocking pool and
    /// back (two thread wake-ups per read). Writes (which fsync) stay on the pool.
    #[tracing::instrument(target = "helix_core::store::spans", name = "redb.batch_get", skip_all, fields(otel.kind = "client", db.system.name = "redb", db.operation.name = "batch_get", db.collection.name = ITEMS_TABLE))]
    async fn batch_get(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        let now = now_epoch();
        let tx = self.db.begin_read().map_err(internal)?;
        let table = tx.open_table(ITEMS).map_err(internal)?;
        keys.iter().map(|k| read_item(&table, k).map(|i| live(i, now))).collect()
    }

    #[tracing::instrument(target = "helix_core::store::spans", name = "redb.put", skip_all, fields(otel.kind = "client", db.system.name = "redb", db.operation.name = "put", db.collection.name = ITEMS_TABLE))]
    async fn put(&self, item: Item, cond: Option<Cond>) -> Result<(), StoreError> {
        match self.transact(vec![WriteOp::Put { item, cond }]).await {
            Err(StoreError::TransactionCanceled { mut reasons }) => match reasons.pop() {
                Some(CancelReason::ConditionFailed { current }) => Err(StoreError::ConditionFailed { current }),
                _ => Err(StoreError::Invalid("unexpected cancellation".into())),
            },
            other => other,
        }
    }

    #[tracing::instrument(target = "helix_core::store::spans", name = "redb.transact", skip_all, fields(otel.kind = "client", db.system.name = "redb", db.operation.name = "transact", db.collection.name = ITEMS_TABLE))]
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        check_transaction(&ops)?;
        self.blocking(move |db| {
            let now = now_epoch();
            let tx = db.begin_write().map_err(internal)?;
            {
                let mut table = tx.open_table(ITEMS).map_err(internal)?;
                let mut reasons = Vec::with_capacity(ops.len());
                for op in &ops {
                    let current = read_item(&table, &op.key())?;
                    let ok = op.cond().is_none_or(|c| c.holds(current.as_ref(), now));
                    reasons.push(if ok {
                        CancelReason::None
                    } else {
                        CancelReason::ConditionFailed { current: live(current, now) }
                    });
                }
                if reasons.iter().any(|r| *r != CancelReason::None) {
                    return Err(StoreError::TransactionCanceled { reasons });
                }
                for op in &ops {
                    match op {
                        WriteOp::Put { item, .. } => {
                            let bytes = encode(item)?;
                            table.insert((item.pk.as_str(), item.sk.as_str()), bytes.as_slice()).map_err(internal)?;
                        }
                        WriteOp::Delete { key, .. } => {
                            table.remove((key.pk.as_str(), key.sk.as_str())).map_err(internal)?;
                        }
                        WriteOp::Check { .. } => {}
                    }
                }
            }
            tx.commit().map_err(internal)
        })
        .await
    }

    #[tracing::instrument(target = "helix_core::store::spans", name = "redb.count", skip_all, fields(otel.kind = "client", db.system.name = "redb", db.operation.name = "count", db.collection.name = ITEMS_TABLE))]
    async fn count(&self, key: &Key, expires_at: i64) -> Result<i64, StoreError> {
        let key = key.clone();
        self.blocking(move |db| {
            let now = now_epoch();
            let tx = db.begin_write().map_err(internal)?;
            let value = {
                let mut table = tx.open_table(ITEMS).map_err(internal)?;
                let mut item = live(read_item(&table, &key)?, now)
                    .unwrap_or_else(|| Item::new(key.pk.clone(), key.sk.clone()).with_n(EXPIRES_AT, expires_at));
                let value = item.n(COUNT).unwrap_or(0).saturating_add(1);
                item.attrs.insert(COUNT.to_owned(), Attr::N(value));
                let bytes = encode(&item)?;
                table.insert((key.pk.as_str(), key.sk.as_str()), bytes.as_slice()).map_err(internal)?;
                value
            };
            tx.commit().map_err(internal)?;
            Ok(value)
        })
        .await
    }

    #[tracing::instrument(target = "helix_core::store::spans", name = "redb.query", skip_all, fields(otel.kind = "client", db.system.name = "redb", db.operation.name = "query", db.collection.name = ITEMS_TABLE))]
    async fn query(&self, pk: &str, sk_prefix: &str, after_sk: Option<&str>, limit: usize) -> Result<Page, StoreError> {
        let (pk, prefix, after) = (pk.to_owned(), sk_prefix.to_owned(), after_sk.map(str::to_owned));
        self.blocking(move |db| {
            let now = now_epoch();
            let tx = db.begin_read().map_err(internal)?;
            let table = tx.open_table(ITEMS).map_err(internal)?;
            let start = match &after {
                Some(a) if a.as_str() > prefix.as_str() => a.clone(),
                _ => prefix.clone(),
            };
            let mut items = Vec::new();
            let mut has_more = false;
            for entry in table.range((pk.as_str(), start.as_str())..).map_err(internal)? {
                let (k, v) = entry.map_err(internal)?;
                let (item_pk, item_sk) = k.value();
                if item_pk != pk || !item_sk.starts_with(&prefix) {
                    break;
                }
                if after.as_deref().is_some_and(|a| item_sk <= a) {
                    continue;
                }
                let item = decode(&Key::new(item_pk, item_sk), v.value())?;
                if item.is_expired(now) {
                    continue;
                }
                if items.len() == limit {
                    has_more = true;
                    break;
                }
                items.push(item);
            }
            Ok(Page { items, has_more })
        })
        .await
    }
}
