//! The connection cap of `helix serve` and each connection's watchdog state.
//!
//! A connection holds one of `max_connections` slots to be served. At the cap, a new
//! connection takes the slot of the oldest one that has sent nothing yet, else of the
//! oldest idle keep-alive one. The connection that gave up its slot is not closed: a
//! client may have connected and not yet sent its head (or the head may not have been
//! read yet). If its head arrives within the header timeout it gets a slot again when
//! one frees (up to the header timeout), else a `503 server_busy` with `Retry-After`.
//! Every accepted socket also holds one of `OPEN_PER_SLOT * max_connections` places;
//! when they run out, the oldest socket that gave up its slot and is still silent is
//! closed (else the next connection waits in the backlog).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ServerLimits;

/// Sockets open at once, per connection slot: a burst of up to this many times the cap
/// is answered in full.
pub const OPEN_PER_SLOT: usize = 4;

/// The server's two bounds: slots (served connections) and open sockets.
pub struct Gate {
    pub slots: Arc<Semaphore>,
    pub open: Arc<Semaphore>,
    open_total: u32,
}

impl Gate {
    pub fn new(limits: &ServerLimits) -> Self {
        let open_total = limits.max_connections * OPEN_PER_SLOT;
        Gate {
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            open: Arc::new(Semaphore::new(open_total)),
            open_total: open_total as u32,
        }
    }
    /// Resolves once every socket has ended.
    pub async fn drained(&self) {
        let _ = self.open.acquire_many(self.open_total).await;
    }
}

/// Each open connection's activity and close token, by accept order (oldest first).
type Conns = BTreeMap<u64, (Arc<Activity>, CancellationToken)>;

/// The open connections in the order they were accepted.
#[derive(Default)]
pub struct Live {
    next: AtomicU64,
    conns: std::sync::Mutex<Conns>,
}

impl Live {
    pub fn register(&self, slot: OwnedSemaphorePermit) -> (u64, Arc<Activity>, CancellationToken) {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (activity, close) = (Arc::new(Activity::new(slot)), CancellationToken::new());
        self.lock().insert(id, (activity.clone(), close.clone()));
        (id, activity, close)
    }
    pub fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    /// Frees the slot of the oldest connection that has sent nothing yet, else of the
    /// oldest idle keep-alive one; never of one with a request (or its head) under way.
    pub fn evict_one(&self) {
        let conns = self.lock();
        let silent = conns.values().find(|(a, _)| a.has_slot() && a.is_silent());
        let idle = || conns.values().find(|(a, _)| a.has_slot() && a.is_idle());
        if let Some((activity, _)) = silent.or_else(idle) {
            activity.give_up_slot();
        }
    }
    /// Closes the oldest connection that gave up its slot and has still sent nothing.
    pub fn close_oldest_evicted_silent(&self) {
        let conns = self.lock();
        let victim = conns.values().find(|(a, t)| !t.is_cancelled() && !a.has_slot() && a.is_silent());
        if let Some((_, token)) = victim {
            token.cancel();
        }
    }
}

/// What the watchdog of one connection needs to know.
pub struct Activity {
    start: Instant,
    /// The connection's slot; `None` once given up to a newer connection.
    slot: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
    /// Milliseconds since `start` (+1) at which the slot was given up; 0 = holds one.
    evicted_since: AtomicU64,
    /// Whether any byte has arrived on the connection.
    heard: AtomicBool,
    in_flight: AtomicUsize,
    /// Milliseconds since `start` at which the connection last became idle.
    idle_since: AtomicU64,
    /// Milliseconds since `start` (+1) of the first byte of a pending request head; 0 = none.
    head_since: AtomicU64,
    /// Wakes the watchdog when the deadline may have moved.
    pub changed: tokio::sync::Notify,
}

impl Activity {
    fn new(slot: OwnedSemaphorePermit) -> Self {
        // Waiting for the first request head counts from accept.
        Activity {
            start: Instant::now(),
            slot: std::sync::Mutex::new(Some(slot)),
            evicted_since: 0.into(),
            heard: false.into(),
            in_flight: 0.into(),
            idle_since: 0.into(),
            head_since: 1.into(),
            changed: tokio::sync::Notify::new(),
        }
    }
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    fn has_slot(&self) -> bool {
        self.slot().is_some()
    }
    fn give_up_slot(&self) {
        if self.slot().take().is_some() {
            self.evicted_since.store(self.now_ms() + 1, Ordering::SeqCst);
            self.changed.notify_one();
        }
    }
    /// Whether a request that has just arrived may be served: the connection holds its
    /// slot, or it gets one back within `wait`.
    pub async fn admitted(&self, slots: &Arc<Semaphore>, wait: Duration) -> bool {
        if self.has_slot() {
            return true;
        }
        match tokio::time::timeout(wait, slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => {
                *self.slot() = Some(permit);
                self.evicted_since.store(0, Ordering::SeqCst);
                true
            }
            _ => false,
        }
    }
    /// Accepted, and not a byte since.
    fn is_silent(&self) -> bool {
        !self.heard.load(Ordering::SeqCst)
    }
    /// Between requests of a kept-alive connection: nothing in flight, no head started.
    fn is_idle(&self) -> bool {
        self.heard.load(Ordering::SeqCst)
            && self.in_flight.load(Ordering::SeqCst) == 0
            && self.head_since.load(Ordering::SeqCst) == 0
    }
    pub fn on_bytes(&self) {
        self.heard.store(true, Ordering::SeqCst);
        if self.in_flight.load(Ordering::SeqCst) == 0 && self.head_since.load(Ordering::SeqCst) == 0 {
            self.head_since.store(self.now_ms() + 1, Ordering::SeqCst);
            self.changed.notify_one();
        }
    }
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.head_since.store(0, Ordering::SeqCst);
        self.changed.notify_one();
        InFlight(self.clone())
    }
    /// When this connection may be closed if nothing changes; None while a request runs.
    /// A connection without a slot waits at most one header timeout from its eviction.
    pub fn deadline(&self, limits: &ServerLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let mut at = match self.head_since.load(Ordering::SeqCst) {
            0 => Duration::from_millis(self.idle_since.load(Ordering::SeqCst)) + limits.idle_timeout,
            head => Duration::from_millis(head - 1) + limits.header_read_timeout,
        };
        if let evicted @ 1.. = self.evicted_since.load(Ordering::SeqCst) {
            at = at.min(Duration::from_millis(evicted - 1) + limits.header_read_timeout);
        }
        Some(self.start + at)
    }
}

/// Marks one request in flight until dropped (the response has been produced).
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle_since.store(self.0.now_ms(), Ordering::SeqCst);
            self.0.changed.notify_one();
        }
    }
}
