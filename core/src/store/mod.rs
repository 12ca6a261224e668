//! The storage seam: a small, DynamoDB-shaped item store (get, conditional put,
//! all-or-nothing transactions with per-action failure reasons, sorted queries).
//! Services speak only this trait; backends must not know about runs or receipts.

pub mod conformance;
#[cfg(feature = "dynamodb")]
pub mod dynamo;
#[cfg(feature = "embedded")]
pub mod embedded;

use std::collections::BTreeMap;

use async_trait::async_trait;

/// The target of the store's client spans (one per call: `redb.get`,
/// `DynamoDB.BatchGetItem`, …). They exist for trace export; when spans are not exported
/// the subscriber switches this target off ([`crate::wiring::subscriber`]), so a call
/// makes no span (one per store call was a few percent of a request).
pub const SPANS_TARGET: &str = "helix_core::store::spans";

/// Attribute name of the TTL column. Expired items are invisible to every read
/// and count as absent for `Cond::NotExists`, because DynamoDB deletes them lazily.
pub const EXPIRES_AT: &str = "expires_at";
/// Attribute name of the value of a counter item ([`Store::count`]).
pub const COUNT: &str = "count";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Attr {
    S(String),
    N(i64),
}

impl Attr {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::S(s) => Some(s),
            Attr::N(_) => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Attr::N(n) => Some(*n),
            Attr::S(_) => None,
        }
    }
}

/// One stored item: its key and a flat map of string or number attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub pk: String,
    pub sk: String,
    pub attrs: BTreeMap<String, Attr>,
}

impl Item {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self { pk: pk.into(), sk: sk.into(), attrs: BTreeMap::new() }
    }
    pub fn with_s(mut self, name: &str, value: impl Into<String>) -> Self {
        self.attrs.insert(name.to_owned(), Attr::S(value.into()));
        self
    }
    pub fn with_n(mut self, name: &str, value: i64) -> Self {
        self.attrs.insert(name.to_owned(), Attr::N(value));
        self
    }
    pub fn s(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).and_then(Attr::as_str)
    }
    pub fn n(&self, name: &str) -> Option<i64> {
        self.attrs.get(name).and_then(Attr::as_i64)
    }
    pub fn key(&self) -> Key {
        Key::new(&self.pk, &self.sk)
    }
    /// True when the item carries a TTL that has passed at `now` (epoch seconds).
    pub fn is_expired(&self, now: i64) -> bool {
        self.n(EXPIRES_AT).is_some_and(|at| at <= now)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub pk: String,
    pub sk: String,
}

impl Key {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self { pk: pk.into(), sk: sk.into() }
    }
}

/// A condition on the item currently stored under the written key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// No live item: never written, or expired.
    NotExists,
    /// A live item exists.
    Exists,
    /// The attribute exists and equals the value.
    Eq(String, Attr),
    /// The attribute is absent.
    Missing(String),
    /// The attribute exists and is a number strictly below the value.
    Lt(String, i64),
    And(Vec<Cond>),
    Or(Vec<Cond>),
}

impl Cond {
    pub fn eq_s(name: &str, value: impl Into<String>) -> Self {
        Cond::Eq(name.to_owned(), Attr::S(value.into()))
    }
    pub fn eq_n(name: &str, value: i64) -> Self {
        Cond::Eq(name.to_owned(), Attr::N(value))
    }

    /// Evaluates the condition against the stored item (None when absent) at `now`.
    /// The embedded backend uses this directly; the DynamoDB backend translates the
    /// same tree into a condition expression, and the conformance suite keeps both equal.
    pub fn holds(&self, current: Option<&Item>, now: i64) -> bool {
        let live = current.filter(|item| !item.is_expired(now));
        match self {
            Cond::NotExists => live.is_none(),
            Cond::Exists => live.is_some(),
            Cond::Eq(name, value) => live.and_then(|i| i.attrs.get(name)) == Some(value),
            Cond::Missing(name) => live.is_none_or(|i| !i.attrs.contains_key(name)),
            Cond::Lt(name, bound) => live.and_then(|i| i.n(name)).is_some_and(|n| n < *bound),
            Cond::And(all) => all.iter().all(|c| c.holds(current, now)),
            Cond::Or(any) => any.iter().any(|c| c.holds(current, now)),
        }
    }
}

/// One action of an all-or-nothing transaction.
#[derive(Debug, Clone)]
pub enum WriteOp {
    Put { item: Item, cond: Option<Cond> },
    Check { key: Key, cond: Cond },
    Delete { key: Key, cond: Option<Cond> },
}

impl WriteOp {
    pub fn key(&self) -> Key {
        match self {
            WriteOp::Put { item, .. } => item.key(),
            WriteOp::Check { key, .. } | WriteOp::Delete { key, .. } => key.clone(),
        }
    }
    pub fn cond(&self) -> Option<&Cond> {
        match self {
            WriteOp::Put { cond, .. } | WriteOp::Delete { cond, .. } => cond.as_ref(),
            WriteOp::Check { cond, .. } => Some(cond),
        }
    }
}

/// Why one action of a cancelled transaction failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelReason {
    /// This action's condition held (or it had none): it did not cause the cancellation.
    None,
    /// The condition failed; `current` is the item as stored (None when absent or expired).
    ConditionFailed { current: Option<Item> },
    /// The backend gave another reason (e.g. a concurrent transaction on the same item).
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub items: Vec<Item>,
    pub has_more: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("condition failed")]
    ConditionFailed { current: Option<Item> },
    #[error("transaction cancelled")]
    TransactionCanceled { reasons: Vec<CancelReason> },
    #[error("invalid store request: {0}")]
    Invalid(String),
    #[error("store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("store failure")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The live item under the key, or None (absent or expired).
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError>;
    /// Live items for each key, in the order of `keys` (at most 100 keys).
    async fn batch_get(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError>;
    /// Writes the item when `cond` holds; otherwise `ConditionFailed` with the stored item.
    async fn put(&self, item: Item, cond: Option<Cond>) -> Result<(), StoreError>;
    /// Applies every action or none (at most 100, each on a distinct key);
    /// a failed condition is `TransactionCanceled` with one reason per action.
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError>;
    /// Live items of `pk` whose sort key starts with `sk_prefix` and sorts after
    /// `after_sk`, ascending, at most `limit`.
    async fn query(&self, pk: &str, sk_prefix: &str, after_sk: Option<&str>, limit: usize) -> Result<Page, StoreError>;
    /// Atomically adds one to the [`COUNT`] attribute of the counter item under `key` and
    /// returns the new value. A new (or expired) counter starts at 1 with `expires_at`;
    /// a live one keeps its expiry. Concurrent callers each see a distinct value.
    async fn count(&self, key: &Key, expires_at: i64) -> Result<i64, StoreError>;
    /// True when other processes read and write the same items (DynamoDB), so state
    /// that must hold across instances (per-minute limits, cancellation) goes through
    /// the store; false when this process is the only one using it.
    fn is_shared(&self) -> bool {
        false
    }
}

/// The store of a function that has no table: every call is `Unavailable`.
pub struct NoStore;

#[derive(Debug, thiserror::Error)]
#[error("this function has no store")]
struct NoStoreError;

#[async_trait]
impl Store for NoStore {
    async fn get(&self, _: &Key) -> Result<Option<Item>, StoreError> {
        Err(StoreError::Unavailable(Box::new(NoStoreError)))
    }
    async fn batch_get(&self, _: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        Err(StoreError::Unavailable(Box::new(NoStoreError)))
    }
    async fn put(&self, _: Item, _: Option<Cond>) -> Result<(), StoreError> {
        Err(StoreError::Unavailable(Box::new(NoStoreError)))
    }
    async fn transact(&self, _: Vec<WriteOp>) -> Result<(), StoreError> {
        Err(StoreError::Unavailable(Box::new(NoStoreError)))
    }
    async fn query(&self, _: &str, _: &str, _: Option<&str>, _: usize) -> Result<Page, StoreError> {
        Err(StoreError::Unavailable(Box::new(NoStoreError)))
    }
    async fn count(&self, _: &Key, _: i64) -> Result<i64, StoreError> {
        Err(StoreError::Unavailable(Box::new(NoStoreError)))
    }
}

/// Validates the shape rules both backends enforce the same way.
#[cfg_attr(not(any(feature = "dynamodb", feature = "embedded")), allow(dead_code))]
pub(crate) fn check_transaction(ops: &[WriteOp]) -> Result<(), StoreError> {
    if ops.is_empty() || ops.len() > 100 {
        return Err(StoreError::Invalid(format!("a transaction takes 1-100 actions, got {}", ops.len())));
    }
    let mut keys: Vec<Key> = ops.iter().map(WriteOp::key).collect();
    keys.sort();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err(StoreError::Invalid("two actions on one item in a transaction".into()));
    }
    Ok(())
}

pub fn now_epoch() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
