//! Store fault injection and call accounting: `FaultyStore` wraps the real store of every
//! `TestApp` and fails one armed call, or counts calls for the round-trip tests. Knows the
//! `Store` trait only, nothing of the features above it.

use std::sync::Arc;

use helix_core::store::Store;

/// Where an injected fault strikes: before the store call reaches the store (nothing
/// written) or after it returned (written, but the caller sees a failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    Before,
    After,
    /// A transaction cancelled without a failed condition (DynamoDB's TransactionConflict).
    Conflict,
}

/// (counts begun, a batch_get begun) of `Faults::require_overlap`.
type Rendezvous = tokio::sync::watch::Sender<(usize, bool)>;

/// Fails the `n`-th store call (1-based, counted from `arm`) once.
#[derive(Default)]
pub struct Faults {
    /// Every store call made, by operation name, for round-trip accounting.
    pub log: std::sync::Mutex<Vec<&'static str>>,
    calls: std::sync::atomic::AtomicUsize,
    plan: std::sync::Mutex<Option<(usize, FaultPoint)>>,
    /// (counts begun, a batch_get begun), while `require_overlap` is armed.
    overlap: std::sync::Mutex<Option<Arc<Rendezvous>>>,
}

impl Faults {
    /// From now on every `count` waits until a `batch_get` has begun, and every `batch_get`
    /// until two `count`s have: calls made one after the other cannot all pass (after 5 s
    /// of waiting the call fails as unavailable).
    pub fn require_overlap(&self) {
        *self.overlap.lock().unwrap() = Some(Arc::new(tokio::sync::watch::channel((0, false)).0));
    }

    async fn overlap(&self, mark: fn(&mut (usize, bool)), ready: fn(&(usize, bool)) -> bool) -> bool {
        let Some(tx) = self.overlap.lock().unwrap().clone() else { return true };
        tx.send_modify(mark);
        let mut rx = tx.subscribe();
        tokio::time::timeout(std::time::Duration::from_secs(5), rx.wait_for(ready)).await.is_ok()
    }

    pub fn arm(&self, nth_call: usize, point: FaultPoint) {
        self.calls.store(0, std::sync::atomic::Ordering::SeqCst);
        *self.plan.lock().unwrap() = Some((nth_call, point));
    }
    fn tick(&self, point: FaultPoint) -> bool {
        let mut plan = self.plan.lock().unwrap();
        let Some((n, at)) = *plan else { return false };
        if at == FaultPoint::Conflict {
            return false; // counted by conflict_now
        }
        let count = if point == FaultPoint::Before {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
        } else {
            self.calls.load(std::sync::atomic::Ordering::SeqCst)
        };
        if count == n && at == point {
            *plan = None;
            return true;
        }
        false
    }
}

fn injected() -> helix_core::store::StoreError {
    helix_core::store::StoreError::Unavailable(Box::new(std::io::Error::other("injected fault")))
}

/// A store wrapper that injects one fault where armed; otherwise transparent.
pub struct FaultyStore {
    pub inner: Arc<dyn Store>,
    pub faults: Arc<Faults>,
}

impl Faults {
    /// Counts a call for an armed `Conflict` and says whether this call is the one.
    fn conflict_now(&self) -> bool {
        let mut plan = self.plan.lock().unwrap();
        let Some((n, FaultPoint::Conflict)) = *plan else { return false };
        let count = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if count == n {
            *plan = None;
            return true;
        }
        false
    }

    /// The store calls made since the last take.
    pub fn take_log(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

macro_rules! faulty {
    ($self:ident, $name:literal, $call:expr) => {{
        $self.faults.log.lock().unwrap().push($name);
        if $self.faults.conflict_now() {
            return Err(helix_core::store::StoreError::TransactionCanceled {
                reasons: vec![helix_core::store::CancelReason::Other("TransactionConflict".into())],
            });
        }
        if $self.faults.tick(FaultPoint::Before) {
            return Err(injected());
        }
        let out = $call.await;
        if $self.faults.tick(FaultPoint::After) {
            return Err(injected());
        }
        out
    }};
}

#[async_trait::async_trait]
impl Store for FaultyStore {
    async fn get(
        &self,
        key: &helix_core::store::Key,
    ) -> Result<Option<helix_core::store::Item>, helix_core::store::StoreError> {
        faulty!(self, "get", self.inner.get(key))
    }
    async fn batch_get(
        &self,
        keys: &[helix_core::store::Key],
    ) -> Result<Vec<Option<helix_core::store::Item>>, helix_core::store::StoreError> {
        if !self.faults.overlap(|s| s.1 = true, |s| s.0 >= 2).await {
            return Err(injected());
        }
        faulty!(self, "batch_get", self.inner.batch_get(keys))
    }
    async fn put(
        &self,
        item: helix_core::store::Item,
        cond: Option<helix_core::store::Cond>,
    ) -> Result<(), helix_core::store::StoreError> {
        faulty!(self, "put", self.inner.put(item, cond))
    }
    async fn transact(&self, ops: Vec<helix_core::store::WriteOp>) -> Result<(), helix_core::store::StoreError> {
        faulty!(self, "transact", self.inner.transact(ops))
    }
    async fn query(
        &self,
        pk: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<helix_core::store::Page, helix_core::store::StoreError> {
        faulty!(self, "query", self.inner.query(pk, prefix, after, limit))
    }
    async fn count(&self, key: &helix_core::store::Key, expires_at: i64) -> Result<i64, helix_core::store::StoreError> {
        // Logged, but outside the numbered calls faults are armed at: a shared store's
        // rate-limit counts run concurrently with the request's data calls.
        self.faults.log.lock().unwrap().push("count");
        if !self.faults.overlap(|s| s.0 += 1, |s| s.1).await {
            return Err(injected());
        }
        self.inner.count(key, expires_at).await
    }
    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }
}
