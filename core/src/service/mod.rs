//! Use cases over the store, one feature service each: accounts (links, principals,
//! sessions, operator policy), sources (credentials, ingress, probes, Device Check,
//! room evidence), rooms, and runs (which read room evidence and probes through
//! sources). `Services` is their container, built once per cold start; each feature
//! holds only the [`Ctx`] and the services it calls, so the dependency order is
//! accounts, sources, rooms <- runs. REST and MCP are two framings of these functions.
//! Must not depend on `http` or `mcp`.

pub mod accounts;
pub mod actor;
pub mod cancel_watch;
pub mod embodiment;
pub mod limits;
pub mod mutation;
pub mod oauth;
pub mod records;
pub mod rooms;
pub mod runs;
pub mod sessions;
pub mod sources;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};

pub use accounts::AccountService;
pub use actor::Actor;
pub use embodiment::EmbodimentService;
pub use mutation::{Mutation, MutationView};
pub use oauth::OAuthService;
pub use rooms::RoomService;
pub use runs::RunService;
pub use sources::SourceService;

use crate::auth::principal::Principal;
use crate::config::Config;
use crate::executor::TurnExecutor;
pub use crate::store::Key;
use crate::store::{Item, Store};
use records::RECEIPT_TTL_SECS;

/// Wall clock with a test-only offset (so expiry and lease paths are testable).
#[derive(Debug, Default)]
pub struct Clock {
    offset_secs: AtomicI64,
}

impl Clock {
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + Duration::seconds(self.offset_secs.load(Ordering::Relaxed))
    }
    pub fn epoch(&self) -> i64 {
        self.now().timestamp()
    }
    pub fn advance(&self, secs: i64) {
        self.offset_secs.fetch_add(secs, Ordering::Relaxed);
    }
}

/// What every feature service shares; cheap to clone (three `Arc`s).
#[derive(Clone)]
pub struct Ctx {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<Clock>,
}

impl Ctx {
    /// When a receipt written now expires.
    pub(crate) fn receipt_expiry(&self) -> i64 {
        self.clock.epoch() + RECEIPT_TTL_SECS
    }
}

/// Every feature service, built once per cold start and shared: a clone is one reference
/// count, whatever the services hold (a request's route, middleware and extractors each
/// take a clone of the state, so a clone of every service's parts was a tenth of a warm
/// request's CPU). The shared parts stay on the container too, for transports and tests
/// (`clock.advance`).
#[derive(Clone)]
pub struct Services(Arc<ServiceSet>);

impl std::ops::Deref for Services {
    type Target = ServiceSet;
    fn deref(&self) -> &ServiceSet {
        &self.0
    }
}

/// What [`Services`] shares.
pub struct ServiceSet {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<Clock>,
    pub accounts: AccountService,
    pub sources: SourceService,
    pub rooms: RoomService,
    pub runs: RunService,
    pub embodiment: EmbodimentService,
    pub oauth: OAuthService,
}

impl Services {
    pub fn new(config: Config, store: Arc<dyn Store>, executor: Arc<dyn TurnExecutor>) -> Self {
        let ctx = Ctx { config: Arc::new(config), store, clock: Arc::new(Clock::default()) };
        let accounts = AccountService::new(ctx.clone());
        let sources = SourceService::new(ctx.clone());
        let rooms = RoomService::new(ctx.clone());
        let runs = RunService::new(ctx.clone(), executor, sources.clone());
        let embodiment = EmbodimentService::new(ctx.clone());
        let oauth = OAuthService::new(ctx.clone());
        let Ctx { config, store, clock } = ctx;
        Self(Arc::new(ServiceSet { config, store, clock, accounts, sources, rooms, runs, embodiment, oauth }))
    }
}

/// The caller of a use case: the verified principal, plus items the transport already
/// read in the same BatchGetItem as the principal's link and binding (a consistent
/// read taken at authentication; every write is still guarded by its own condition).
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    prefetched: Vec<(Key, Option<Item>)>,
}

impl Caller {
    pub fn with_prefetched(principal: Principal, prefetched: Vec<(Key, Option<Item>)>) -> Self {
        Self { principal, prefetched }
    }

    /// The prefetched item for `key`: `Some(None)` means read and absent; `None`, not read.
    pub fn prefetched(&self, key: &Key) -> Option<Option<Item>> {
        self.prefetched.iter().find(|(k, _)| k == key).map(|(_, item)| item.clone())
    }
}

impl std::ops::Deref for Caller {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.principal
    }
}
