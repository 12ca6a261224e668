//! Minecraft Player Embodiment, in three lanes: `pairing` (cookie: the room owner pairs,
//! rotates and revokes an action connector and clears stops), `connector` (southbound:
//! credential authentication with every boundary rechecked, registration with a fencing
//! epoch, the one poll: acknowledgements in, leased commands, cancel list and Emergency
//! Stop out) and `player` (the agent, and a member in the browser: subjects, selection and
//! control lease, typed actions as durable workflows, status, control). The rules the lanes
//! share: `owner` (the room owner's checks), `late` (late effects), `bounds` (regions,
//! rates, dispatch gates). The table is the kernel's (`records::embodiment`). Reads
//! sessions, policies and rooms as values; must not depend on runs, nor on `http` or `mcp`.

// The three lanes: each one's public methods are its use cases.
mod connector;
mod pairing;
mod player;
// The rules the lanes share: the room owner's checks, late effects, bounds.
mod bounds;
mod late;
mod owner;

use crate::service::Ctx;

pub use bounds::{ACTIONS_PER_MINUTE, RegionRequest, RegionSet};
pub use connector::AuthedConnector;
pub use pairing::{ClearStopRequest, PairingRevoked, PairingRoom};
pub use player::{Control, RoomIdentity, SubjectStopOutcome};

/// The suggested poll interval of a connector, and what an agent is told to wait.
pub const POLL_INTERVAL_MS: u64 = 500;
/// A connector that has not reached Helix for this long halts its players on its own.
pub const DEAD_MAN_MS: u64 = 10_000;
/// A connector seen within this many seconds is live.
pub const LIVE_SECS: i64 = 30;
/// The connector's last-seen time is written at most this often (an idle poll reads only).
pub const LAST_SEEN_WRITE_SECS: i64 = 5;
/// A control lease lapses after this long without a selection or an action.
pub const LEASE_SECS: i64 = 300;
/// Most block changes (break or place) one workflow may make.
pub const MAX_BLOCK_CHANGES: u32 = 16;
/// Most environment bindings a room lists.
pub const MAX_BINDINGS: usize = 8;
/// Bounded re-reads of a write that lost a race.
const RACE_RETRIES: usize = 8;
/// The environment variable the connector reads its credential from.
pub const CREDENTIAL_ENV: &str = "HELIX_CONNECTOR_CREDENTIAL";

/// Pairing, the connector protocol and the agent's embodiment tools.
#[derive(Clone)]
pub struct EmbodimentService {
    ctx: Ctx,
    /// The connector credential lookups this process has read.
    lookups: std::sync::Arc<connector::LookupCache>,
}

impl std::ops::Deref for EmbodimentService {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        &self.ctx
    }
}

impl EmbodimentService {
    pub(crate) fn new(ctx: Ctx) -> Self {
        Self { ctx, lookups: Default::default() }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }
}
