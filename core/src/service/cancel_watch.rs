//! Cancellation across instances. A cancel committed through another process (another
//! warm Lambda instance) cannot reach this process's cancellation token, so while a turn
//! runs here a watcher polls its run item and fires the token once the run is no longer
//! this turn's: ended (cancelled), gone, or claimed by another continuation. Firing the
//! token drops the executor call (and its connection to Helix Ask); the claim CAS then
//! keeps the stale turn from finalizing anything.
//!
//! Cost: one strongly consistent GetItem per running turn per [`POLL_INTERVAL`]; nothing
//! when no turn runs, and nothing on a store no other process writes (the in-process
//! token already covers that). Depends on `store` and `records` only.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::records::{run_from_item, run_key};
use crate::domain::run::Run;
use crate::store::Store;

/// How often a running turn re-reads its run: a cancel is noticed within about this
/// long plus one read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A running watcher; dropping it stops the watch.
#[must_use = "the watch stops when this is dropped"]
pub struct Watch(tokio::task::JoinHandle<()>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Watches `run_id` while the turn holding `claim_token` runs; fires `cancel` when the
/// run stops being that turn's. Stops by itself once `cancel` fires.
pub fn watch(
    store: Arc<dyn Store>,
    run_id: &str,
    claim_token: &str,
    cancel: CancellationToken,
    every: Duration,
) -> Watch {
    let (key, claim_token) = (run_key(run_id), claim_token.to_owned());
    Watch(tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let still_ours = match store.get(&key).await {
                Ok(Some(item)) => match run_from_item(&item) {
                    Ok(run) => holds_claim(&run, &claim_token),
                    Err(_) => true, // unreadable: leave the decision to the finalize CAS
                },
                Ok(None) => false,
                Err(error) => {
                    // A failed read proves nothing: keep running, the deadline still applies.
                    tracing::warn!(error = &error as &dyn std::error::Error, "cancel watch read failed");
                    true
                }
            };
            if !still_ours {
                tracing::info!(run_id = %key.pk.trim_start_matches("RUN#"), "run ended elsewhere; stopping its turn");
                cancel.cancel();
                return;
            }
        }
    }))
}

/// The turn may go on: the run is live and still claimed by it.
fn holds_claim(run: &Run, claim_token: &str) -> bool {
    !run.is_terminal() && run.claim.as_ref().is_some_and(|c| c.token == claim_token)
}
