//! Run listings and the signed-in person's view of their agents' runs. Listings read the
//! account's run entries (written with each run, newest first), then the runs on the page
//! in one BatchGetItem; the `status` filter and, for a bearer caller, the owner filter are
//! applied to the runs as read, so a status change needs no index write. The person's
//! reads and cancel take the runs an agent binding of the account started under the owner
//! tuple the browser signed in with (the bearer routes' tuple: another tenant's runs of the
//! same account are `not_found`).

use crate::domain::account::account_ref;
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::page::{self, PagedList};
use crate::domain::run::{CancelRequest, Run, RunListQuery};
use crate::domain::scopes::RUNS_READ;
use crate::domain::wire::{EventPageView, EvidenceBundleView, NotAnAnswer, RunListSchemaName, RunListView, RunView};
use crate::error::ApiError;
use crate::service::records::run_key;
use crate::service::records::runs::{events_after, is_account_run_sk, runs_by_id, runs_of_account};
use crate::service::{Caller, Mutation};

use super::{Actor, RunService};
use crate::service::sessions::Session;

/// Run entries read per page.
pub const RUN_PAGE: usize = 25;

impl RunService {
    /// The caller's own runs (`GET /api/v1/agent-runs`): those its agent binding started.
    pub async fn list_runs(&self, p: &Caller, q: &RunListQuery) -> Result<RunListView, ApiError> {
        p.require(&[RUNS_READ])?;
        let owner = p.owner_hash();
        self.runs_page(&p.account_id, PagedList::Runs, &owner, Some(&owner), q).await
    }

    /// The runs of every agent binding of the signed-in person's account under the owner
    /// tuple they signed in with (`/runs`); a session without one lists nothing.
    pub async fn person_runs(&self, s: &Session, q: &RunListQuery) -> Result<RunListView, ApiError> {
        // Nothing matches an empty owner hash: a session from before the tuple was recorded
        // lists no run (fail closed; signing in again records it).
        let owner = s.owner_hash.as_deref().unwrap_or("");
        self.runs_page(&s.account_id, PagedList::AccountRuns, owner, Some(owner), q).await
    }

    async fn runs_page(
        &self,
        account_id: &str,
        list: PagedList,
        scope: &str,
        owner: Option<&str>,
        q: &RunListQuery,
    ) -> Result<RunListView, ApiError> {
        let after = page::decode_opt(q.cursor.as_deref(), list, scope, None, is_account_run_sk)?;
        let entries =
            runs_of_account(&*self.store, account_id, after.as_ref().map(|c| c.after.as_str()), RUN_PAGE).await?;
        let ids: Vec<String> = entries
            .entries
            .iter()
            .filter(|e| owner.is_none_or(|o| e.owner_hash == o))
            .map(|e| e.run_id.clone())
            .collect();
        let (now, account) = (self.clock.epoch(), account_ref(account_id));
        let runs = runs_by_id(&*self.store, &ids)
            .await?
            .into_iter()
            .filter(|r| r.ownership.account_ref == account && owner.is_none_or(|o| r.owner_hash == o))
            .map(|r| RunView::observed(&r, now))
            .filter(|v| q.status.keeps(v))
            .collect();
        let next_cursor =
            entries.last_sk.filter(|_| entries.has_more).map(|last| page::encode(list, scope, None, &last));
        Ok(RunListView {
            schema: RunListSchemaName,
            runs,
            has_more: next_cursor.is_some(),
            next_cursor,
            flags: NotAnAnswer::default(),
        })
    }

    /// The person's run ([`Actor::person`]); any other is `not_found`.
    async fn person_run(&self, s: &Session, run_id: &str) -> Result<Run, ApiError> {
        let id = RunId::parse(run_id).ok_or(ApiError::NotFound)?;
        let item = self.store.get(&run_key(id.as_str())).await?.ok_or(ApiError::NotFound)?;
        Actor::person(s).owns(&item)
    }

    /// The person's run as inspect shows it (observed: a run held by a turn reads `running`).
    pub async fn person_inspect(&self, s: &Session, run_id: &str) -> Result<RunView, ApiError> {
        Ok(RunView::observed(&self.person_run(s, run_id).await?, self.clock.epoch()))
    }

    pub async fn person_evidence(&self, s: &Session, run_id: &str) -> Result<EvidenceBundleView, ApiError> {
        Ok(EvidenceBundleView::of(&self.person_run(s, run_id).await?))
    }

    /// Everything the run page shows, from one read of the run and one page of its events
    /// (the first `limit`).
    pub async fn person_page(
        &self,
        s: &Session,
        run_id: &str,
        limit: usize,
    ) -> Result<(RunView, EvidenceBundleView, EventPageView), ApiError> {
        let run = self.person_run(s, run_id).await?;
        let page = events_after(&*self.store, &run.run_id, 0, limit).await?;
        let events = EventPageView::new(&run.run_id, page.events, 0, page.has_more);
        Ok((RunView::observed(&run, self.clock.epoch()), EvidenceBundleView::of(&run), events))
    }

    pub async fn person_events(
        &self,
        s: &Session,
        run_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<EventPageView, ApiError> {
        crate::domain::run::check_event_limit(limit)?;
        let run = self.person_run(s, run_id).await?;
        let page = events_after(&*self.store, &run.run_id, after_seq, limit as usize).await?;
        Ok(EventPageView::new(&run.run_id, page.events, after_seq, page.has_more))
    }

    /// The person's kill switch: the run's own cancel (receipt, version check, the stop
    /// signal to a running turn, here or through the store on another instance).
    pub async fn person_cancel(
        &self,
        s: &Session,
        run_id: &str,
        key: &IdempotencyKey,
        req: CancelRequest,
    ) -> Result<Mutation, ApiError> {
        self.cancel_as(Actor::person(s), run_id, key, req).await
    }
}
