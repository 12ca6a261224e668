//! The shared counters of the HTTP limiter's per-minute windows: with a store shared
//! between processes (DynamoDB), one atomic counter item per window and minute is the
//! authority, so a limit holds across processes. What a window counts (and its stored
//! text) is the limiter's; the counter's key is the storage kernel's.

use std::sync::Arc;

use super::records::limits::counter_key;
use crate::store::{Store, StoreError};

/// The window counters of a shared store.
#[derive(Clone)]
pub struct WindowCounters {
    store: Arc<dyn Store>,
}

impl WindowCounters {
    /// Counters in `store` when it is shared between processes; None: windows are
    /// counted in process memory only.
    pub fn shared(store: Arc<dyn Store>) -> Option<Self> {
        store.is_shared().then_some(Self { store })
    }

    /// Counts one request in the window whose stored text is `window`, in `minute`; the
    /// new count. A short TTL: the window's minute plus one, so lazily deleted items stay few.
    pub async fn count(&self, window: &str, minute: i64) -> Result<i64, StoreError> {
        self.store.count(&counter_key(window, minute), (minute + 2) * 60).await
    }
}

impl super::Services {
    /// The HTTP limiter's shared counters (None: the store is not shared).
    pub fn window_counters(&self) -> Option<WindowCounters> {
        WindowCounters::shared(self.store.clone())
    }
}
