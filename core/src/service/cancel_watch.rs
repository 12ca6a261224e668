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
    let (key, run_id, claim_token) = (run_key(run_id), run_id.to_owned(), claim_token.to_owned());
    // In the turn's span: its reads are store calls of the turn.
    Watch(tokio::spawn(tracing::Instrument::in_current_span(async move {
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
                tracing::info!(run_id = %run_id, "run ended elsewhere; stopping its turn");
                cancel.cancel();
                return;
            }
        }
    })))
}

/// The turn may go on: the run is live and still claimed by it.
fn holds_claim(run: &Run, claim_token: &str) -> bool {
    !run.is_terminal() && run.claim.as_ref().is_some_and(|c| c.token == claim_token)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::domain::ids::RunId;
    use crate::domain::run::{Claim, Ownership, StartRequest};
    use crate::service::records::run_item;
    use crate::store::{Cond, Item, Key, Page, StoreError, WriteOp};

    /// One run item, and how many times it was read.
    #[derive(Default)]
    struct OneRun {
        item: Mutex<Option<Item>>,
        fail: Mutex<bool>,
        gets: Mutex<u32>,
    }

    #[async_trait::async_trait]
    impl Store for OneRun {
        async fn get(&self, _: &Key) -> Result<Option<Item>, StoreError> {
            *self.gets.lock().unwrap() += 1;
            if *self.fail.lock().unwrap() {
                return Err(StoreError::Unavailable(Box::new(std::io::Error::other("down"))));
            }
            Ok(self.item.lock().unwrap().clone())
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
            unreachable!()
        }
    }

    fn claimed_run(claim_token: &str) -> Run {
        let spec: StartRequest = serde_json::from_value(serde_json::json!({ "objective": "o" })).unwrap();
        let owner = Ownership { owner_ref: "o".into(), tenant_ref: "t".into(), account_ref: "a".into() };
        let mut run =
            Run::new(&RunId::generate(), "owner".into(), owner, spec.validate().unwrap(), &[], chrono::Utc::now());
        run.claim = Some(Claim { token: claim_token.into(), lease_until: i64::MAX, key_ref: "IDEM#k".into() });
        run
    }

    fn store_with(run: &Run) -> Arc<OneRun> {
        let store = Arc::new(OneRun::default());
        *store.item.lock().unwrap() = Some(run_item(run).unwrap());
        store
    }

    async fn seconds(s: f64) {
        tokio::time::sleep(Duration::from_secs_f64(s)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_still_holding_its_claim_is_left_alone_with_one_read_a_second() {
        let run = claimed_run("mine");
        let store = store_with(&run);
        let cancel = CancellationToken::new();
        let watch = watch(store.clone(), &run.run_id, "mine", cancel.clone(), POLL_INTERVAL);
        seconds(3.5).await;
        assert!(!cancel.is_cancelled());
        assert_eq!(*store.gets.lock().unwrap(), 3);
        *store.fail.lock().unwrap() = true;
        seconds(2.0).await;
        assert!(!cancel.is_cancelled(), "a failed read proves nothing");
        drop(watch);
        seconds(5.0).await;
        assert_eq!(*store.gets.lock().unwrap(), 5, "no reads once the turn is over");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_cancelled_elsewhere_fires_the_token_and_the_watch_stops() {
        let mut run = claimed_run("mine");
        let store = store_with(&run);
        let cancel = CancellationToken::new();
        let _watch = watch(store.clone(), &run.run_id, "mine", cancel.clone(), POLL_INTERVAL);
        seconds(1.5).await;
        run.cancel(chrono::Utc::now());
        *store.item.lock().unwrap() = Some(run_item(&run).unwrap());
        seconds(1.0).await;
        assert!(cancel.is_cancelled(), "noticed at the next read");
        seconds(5.0).await;
        assert_eq!(*store.gets.lock().unwrap(), 2, "the watch stopped");
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_taken_over_or_a_missing_run_fires_the_token() {
        let run = claimed_run("someone-else");
        let cancel = CancellationToken::new();
        let _watch = watch(store_with(&run), &run.run_id, "mine", cancel.clone(), POLL_INTERVAL);
        seconds(1.5).await;
        assert!(cancel.is_cancelled());

        let gone = Arc::new(OneRun::default());
        let cancel = CancellationToken::new();
        let _watch = watch(gone, &run.run_id, "mine", cancel.clone(), POLL_INTERVAL);
        seconds(1.5).await;
        assert!(cancel.is_cancelled());
    }
}
