//! Per-minute fixed-window limits (the contract's `*_IP_RATE_LIMIT` and
//! `*_PRINCIPAL_RATE_LIMIT`). Every window is counted in process memory; with a shared
//! store (DynamoDB) the store's atomic counter `RL#<sha256(key)>#<minute>` is the
//! authority, so a limit holds across processes (on Lambda: across warm instances).
//! A window already full in this process is refused with no round trip, and a window
//! the shared counter refused is marked full here, so a flood costs each instance at
//! most `limit` counter writes per key and minute. Fail closed: a count saturates, it
//! never wraps, and a shared counter that cannot be read refuses (503), never admits.
//! What a window counts is a typed [`WindowKey`]; its stored text is spelled out here,
//! never derived from `Debug`, so renaming a route group cannot reset deployed windows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use super::Group;
use crate::error::ApiError;
use crate::service::limits::WindowCounters;

/// What one per-minute window counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowKey {
    /// The pre-auth window of a caller's address in a route group.
    Ip { group: Group, ip: String },
    /// A verified token identity in a route group.
    Principal { group: Group, identity: String },
    /// A signed-in account in a cookie lane that counts accounts.
    Account { group: Group, account_id: String },
    /// A room source on producer ingress.
    Source { source_id: String },
    /// An action connector (environment binding) on the connector routes.
    Connector { binding_id: String },
}

impl WindowKey {
    /// The key's stored text (hashed into the counter item): `ip:Mcp:203.0.113.9`.
    pub fn stored(&self) -> String {
        match self {
            WindowKey::Ip { group, ip } => format!("ip:{}:{ip}", stored_group(*group)),
            WindowKey::Principal { group, identity } => format!("principal:{}:{identity}", stored_group(*group)),
            WindowKey::Account { group, account_id } => format!("account:{}:{account_id}", stored_group(*group)),
            WindowKey::Source { source_id } => format!("source:{source_id}"),
            WindowKey::Connector { binding_id } => format!("connector:{binding_id}"),
        }
    }
}

/// A route group's name in stored window keys. These are data, not code names: keep
/// each string as it is when a variant is renamed.
fn stored_group(group: Group) -> &'static str {
    match group {
        Group::AgentRuns => "AgentRuns",
        Group::Mcp => "Mcp",
        Group::Discovery => "Discovery",
        Group::Account => "Account",
        Group::Rooms => "Rooms",
        Group::Observer => "Observer",
        Group::SourceBrowser => "SourceBrowser",
        Group::Ingress => "Ingress",
        Group::DeviceCheck => "DeviceCheck",
        Group::Connector => "Connector",
    }
}

#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, (i64, u32)>>,
}

impl RateLimiter {
    /// Counts one request for `key` in the minute of `now_epoch`; Err(seconds to wait)
    /// when `limit` is already reached. A limit of 0 disables the check.
    pub fn check(&self, key: &str, limit: u32, now_epoch: i64) -> Result<(), u64> {
        if limit == 0 {
            return Ok(());
        }
        let minute = now_epoch.div_euclid(60);
        let mut map = self.windows.lock().expect("rate limiter");
        if map.len() > 50_000 {
            map.retain(|_, (m, _)| *m == minute);
        }
        let entry = map.entry(key.to_owned()).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        if entry.1 >= limit {
            return Err(retry_after(now_epoch));
        }
        entry.1 = entry.1.saturating_add(1);
        Ok(())
    }

    /// Marks the window of `key` full until the minute of `now_epoch` ends.
    fn fill(&self, key: &str, limit: u32, now_epoch: i64) {
        let minute = now_epoch.div_euclid(60);
        let mut map = self.windows.lock().expect("rate limiter");
        let entry = map.entry(key.to_owned()).or_insert((minute, 0));
        if entry.0 == minute {
            entry.1 = entry.1.max(limit);
        }
    }
}

/// Seconds until the window of `now_epoch` ends (1-60).
fn retry_after(now_epoch: i64) -> u64 {
    (60 - now_epoch.rem_euclid(60)) as u64
}

/// Why a request was not admitted by a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The window is full: 429 with `Retry-After`.
    Limited { retry_after_secs: u64 },
    /// The shared counter could not be counted (logged where it failed): 503.
    Unavailable,
}

#[derive(Debug, thiserror::Error)]
#[error("the shared rate-limit counter is unavailable")]
struct CounterUnavailable;

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Limited { retry_after_secs } => ApiError::RateLimited { retry_after_secs },
            Refusal::Unavailable => ApiError::Unavailable(Box::new(CounterUnavailable)),
        }
    }
}

/// One counted request whose verdict may still be in flight (the shared counter),
/// so callers can overlap it with other work (the authentication read) and await it
/// before anything with an effect. Cloning shares the one count.
#[derive(Clone)]
pub struct Window(Shared<BoxFuture<'static, Result<(), Refusal>>>);

impl Window {
    fn ready(verdict: Result<(), Refusal>) -> Self {
        Window(futures::future::ready(verdict).boxed().shared())
    }

    /// The verdict; immediate when it was decided in process.
    pub async fn verdict(&self) -> Result<(), Refusal> {
        self.0.clone().await
    }
}

/// The limits of one process: in memory, plus the store's counters when it is shared.
pub struct RateLimits {
    local: Arc<RateLimiter>,
    shared: Option<WindowCounters>,
}

impl RateLimits {
    /// Windows counted through the `shared` counters (a store shared between processes),
    /// else in memory.
    pub fn new(shared: Option<WindowCounters>) -> Self {
        Self { local: Arc::new(RateLimiter::default()), shared }
    }

    /// True when windows are counted in the shared store.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Counts one request for `key` in the minute of `now`. Refused at once when this
    /// process already filled the window; otherwise the shared count (if any) starts now,
    /// in its own task, and the returned window answers it. A limit of 0 disables the check.
    pub fn start(&self, key: WindowKey, limit: u32, now: i64) -> Result<Window, Refusal> {
        if limit == 0 {
            return Ok(Window::ready(Ok(())));
        }
        let key = key.stored();
        self.local.check(&key, limit, now).map_err(|retry_after_secs| Refusal::Limited { retry_after_secs })?;
        let Some(counters) = self.shared.clone() else { return Ok(Window::ready(Ok(()))) };
        let local = self.local.clone();
        // In the request's span: the shared count is one of its store calls.
        let task = tokio::spawn(tracing::Instrument::in_current_span(async move {
            match counters.count(&key, now.div_euclid(60)).await {
                Ok(n) if n <= i64::from(limit) => Ok(()),
                Ok(_) => {
                    local.fill(&key, limit, now);
                    Err(Refusal::Limited { retry_after_secs: retry_after(now) })
                }
                Err(error) => {
                    tracing::error!(error = &error as &dyn std::error::Error, "rate-limit counter failed");
                    Err(Refusal::Unavailable)
                }
            }
        }));
        Ok(Window(async move { task.await.unwrap_or(Err(Refusal::Unavailable)) }.boxed().shared()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Cond, Item, Key, Page, Store, StoreError, WriteOp};

    #[test]
    fn a_window_admits_the_limit_then_refuses_until_the_next_minute() {
        let rl = RateLimiter::default();
        assert!(rl.check("ip:1", 2, 120).is_ok());
        assert!(rl.check("ip:1", 2, 121).is_ok());
        assert_eq!(rl.check("ip:1", 2, 130), Err(50));
        assert!(rl.check("ip:2", 2, 130).is_ok(), "keys are independent");
        assert!(rl.check("ip:1", 2, 180).is_ok(), "next minute");
    }

    #[test]
    fn each_groups_stored_window_keys_are_the_deployed_strings() {
        let ip = "203.0.113.9";
        for (group, name) in [
            (Group::AgentRuns, "AgentRuns"),
            (Group::Mcp, "Mcp"),
            (Group::Discovery, "Discovery"),
            (Group::Account, "Account"),
            (Group::Rooms, "Rooms"),
            (Group::Observer, "Observer"),
            (Group::SourceBrowser, "SourceBrowser"),
            (Group::Ingress, "Ingress"),
            (Group::DeviceCheck, "DeviceCheck"),
        ] {
            assert_eq!(WindowKey::Ip { group, ip: ip.into() }.stored(), format!("ip:{name}:{ip}"));
            assert_eq!(WindowKey::Principal { group, identity: "h1".into() }.stored(), format!("principal:{name}:h1"));
        }
        assert_eq!(WindowKey::Ip { group: Group::Mcp, ip: ip.into() }.stored(), "ip:Mcp:203.0.113.9");
        assert_eq!(
            WindowKey::Principal { group: Group::AgentRuns, identity: "h1".into() }.stored(),
            "principal:AgentRuns:h1"
        );
        assert_eq!(
            WindowKey::Account { group: Group::Observer, account_id: "a1".into() }.stored(),
            "account:Observer:a1"
        );
        let browser = WindowKey::Account { group: Group::SourceBrowser, account_id: "a1".into() };
        assert_eq!(browser.stored(), "account:SourceBrowser:a1");
        assert_eq!(WindowKey::Source { source_id: "src_1".into() }.stored(), "source:src_1");
    }

    /// A store shared with other processes whose counter starts at `base` (what the others
    /// already counted), or fails.
    struct SharedCounter {
        base: i64,
        fail: bool,
        calls: Mutex<i64>,
    }

    #[async_trait::async_trait]
    impl Store for SharedCounter {
        async fn get(&self, _: &Key) -> Result<Option<Item>, StoreError> {
            unreachable!()
        }
        async fn batch_get(&self, _: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
            unreachable!()
        }
        async fn put(&self, _: Item, _: Option<Cond>) -> Result<(), StoreError> {
            unreachable!()
        }
        async fn transact(&self, _: Vec<WriteOp>) -> Result<(), StoreError> {
            unreachable!()
        }
        async fn query(&self, _: &str, _: &str, _: Option<&str>, _: usize) -> Result<Page, StoreError> {
            unreachable!()
        }
        async fn count(&self, _: &Key, _: i64) -> Result<i64, StoreError> {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            if self.fail {
                return Err(StoreError::Unavailable(Box::new(CounterUnavailable)));
            }
            Ok(self.base + *calls)
        }
        fn is_shared(&self) -> bool {
            true
        }
    }

    fn p() -> WindowKey {
        WindowKey::Source { source_id: "p".into() }
    }

    #[tokio::test]
    async fn the_shared_counter_decides_and_a_refused_window_is_then_refused_locally() {
        let store = Arc::new(SharedCounter { base: 2, fail: false, calls: Mutex::new(0) });
        let limits = RateLimits::new(WindowCounters::shared(store.clone()));
        assert!(limits.is_shared());
        // Other processes counted 2 of 3: this process admits one more, then refuses.
        assert_eq!(limits.start(p(), 3, 125).unwrap().verdict().await, Ok(()));
        let refused = limits.start(p(), 3, 126).unwrap().verdict().await;
        assert_eq!(refused, Err(Refusal::Limited { retry_after_secs: 54 }));
        assert!(limits.start(p(), 3, 127).is_err(), "refused in process, no round trip");
        assert_eq!(*store.calls.lock().unwrap(), 2);
        assert_eq!(limits.start(p(), 0, 127).unwrap().verdict().await, Ok(()), "0 disables");
    }

    #[tokio::test]
    async fn an_unavailable_shared_counter_refuses() {
        let limits = RateLimits::new(WindowCounters::shared(Arc::new(SharedCounter {
            base: 0,
            fail: true,
            calls: Mutex::new(0),
        })));
        assert_eq!(limits.start(p(), 3, 0).unwrap().verdict().await, Err(Refusal::Unavailable));
    }

    #[tokio::test]
    async fn an_unshared_store_counts_in_memory() {
        let limits = RateLimits::new(WindowCounters::shared(Arc::new(crate::store::NoStore)));
        assert!(!limits.is_shared());
        assert_eq!(limits.start(p(), 1, 0).unwrap().verdict().await, Ok(()));
        assert!(matches!(limits.start(p(), 1, 1), Err(Refusal::Limited { retry_after_secs: 59 })));
    }
}
