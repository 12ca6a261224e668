//! Run listings and the run page. Listings read the account's run entries (written with
//! each run, newest first), then the runs on the page in one BatchGetItem; the `status`
//! filter and the owner filter ([`Actor::run_listing`]) are applied to the runs as read,
//! so a status change needs no index write.

use crate::domain::account::account_ref;
use crate::domain::page::{self, PagedList};
use crate::domain::run::RunListQuery;
use crate::domain::scopes::RUNS_READ;
use crate::domain::wire::{EventPageView, EvidenceBundleView, NotAnAnswer, RunListSchemaName, RunListView, RunView};
use crate::error::ApiError;
use crate::service::records::runs::{events_after, is_account_run_sk, runs_by_id, runs_of_account};

use super::{Actor, RunService};

/// Run entries read per page.
pub const RUN_PAGE: usize = 25;

impl RunService {
    /// The actor's runs, newest first: an agent's, those its agent binding started
    /// (`GET /api/v1/agent-runs`); a person's, those of every agent binding of the account
    /// under the owner tuple they signed in with (`/runs`; a session without one lists
    /// nothing).
    pub async fn list_runs(&self, actor: &Actor, q: &RunListQuery) -> Result<RunListView, ApiError> {
        actor.require(&[RUNS_READ])?;
        let (list, owner) = actor.run_listing();
        self.runs_page(actor.account_id(), list, &owner, Some(&owner), q).await
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

    /// Everything the run page shows, from one read of the run and one page of its events
    /// (the first `limit`).
    pub async fn run_page(
        &self,
        actor: &Actor,
        run_id: &str,
        limit: usize,
    ) -> Result<(RunView, EvidenceBundleView, EventPageView), ApiError> {
        actor.require(&[RUNS_READ])?;
        let run = self.owned_run(actor, run_id).await?;
        let page = events_after(&*self.store, &run.run_id, 0, limit).await?;
        let events = EventPageView::new(&run.run_id, page.events, 0, page.has_more);
        Ok((RunView::observed(&run, self.clock.epoch()), EvidenceBundleView::of(&run), events))
    }
}
