//! Runs and their events as stored: keys, the run item (its body, its `rev` and its
//! owner attribute), the conditions that guard run writes (including another feature's
//! check of a run's owner) and the event page query. Knows no use case.

use super::BODY;
use super::accounts::account_key;
use super::attrs::{OWNER_HASH, REV, RUN_ID, SEQ};
use super::version;
use crate::domain::event::Event;
use crate::domain::run::Run;
use crate::error::ApiError;
use crate::store::{Cond, Item, Key, Store};

const RUN_SK: &str = "RUN";
const EVENT_PREFIX: &str = "EVT#";
/// The sort-key prefix of an account's run entries (beside its `ROOM#` and `AGENTBIND#`).
const ACCOUNT_RUN_PREFIX: &str = "RUN#";
/// Run entries sort by this minus the run's creation time in milliseconds (15 digits),
/// so the ascending query the store offers reads them newest first.
const NEWEST_FIRST: i64 = 999_999_999_999_999;

/// The version of the run body this code writes (see [`version`]); the run is also
/// the domain's value, so the version lives on the stored side only.
pub const RUN_BODY_VERSION: u32 = version::FIRST;
/// The version of the event body this code writes; events are also the wire's.
pub const EVENT_BODY_VERSION: u32 = version::FIRST;

pub fn run_key(run_id: &str) -> Key {
    Key::new(run_pk(run_id), RUN_SK)
}

pub(super) fn run_pk(run_id: &str) -> String {
    format!("RUN#{run_id}")
}

pub fn event_sk(seq: u64) -> String {
    format!("{EVENT_PREFIX}{seq:020}")
}

pub fn event_key(run_id: &str, seq: u64) -> Key {
    Key::new(run_pk(run_id), event_sk(seq))
}

/// The run item: the run as its body, with `rev` and the owner hash beside it for the
/// conditions that must not parse the body.
pub fn run_item(run: &Run) -> Result<Item, ApiError> {
    let key = run_key(&run.run_id);
    Ok(Item::new(key.pk, key.sk)
        .with_n(REV, run.rev as i64)
        .with_s(OWNER_HASH, &run.owner_hash)
        .with_s(BODY, version::write(run, RUN_BODY_VERSION)?))
}

pub fn run_from_item(item: &Item) -> Result<Run, ApiError> {
    version::read(item.s(BODY).unwrap_or_default())
}

/// True when the run item belongs to `owner_hash` (read without parsing the body).
pub fn is_owned_by(item: &Item, owner_hash: &str) -> bool {
    item.s(OWNER_HASH) == Some(owner_hash)
}

/// The condition guarding every run write: nobody wrote since we read `rev`.
pub fn run_unchanged(rev: u64) -> Cond {
    Cond::eq_n(REV, rev as i64)
}

/// The check another feature puts on a run it binds (rooms): the run is this owner's.
pub fn owned_by_cond(owner_hash: &str) -> Cond {
    Cond::eq_s(OWNER_HASH, owner_hash)
}

pub fn event_item(e: &Event) -> Result<Item, ApiError> {
    let key = event_key(&e.run_id, e.seq);
    Ok(Item::new(key.pk, key.sk).with_n(SEQ, e.seq as i64).with_s(BODY, version::write(e, EVENT_BODY_VERSION)?))
}

pub fn event_from_item(item: &Item) -> Result<Event, ApiError> {
    version::read(item.s(BODY).unwrap_or_default())
}

/// The key of the account's entry for a run: under the account's partition, sorted newest
/// first by creation time, then by run id.
pub fn account_run_key(account_id: &str, created_ms: i64, run_id: &str) -> Key {
    let inverted = (NEWEST_FIRST - created_ms).clamp(0, NEWEST_FIRST);
    Key::new(account_key(account_id).pk, format!("{ACCOUNT_RUN_PREFIX}{inverted:015}#{run_id}"))
}

/// The account's entry for `run`, written in the transaction that creates the run: the
/// run id and its owner hash (which agent binding started it), nothing that changes.
pub fn account_run_item(account_id: &str, run: &Run) -> Item {
    let key = account_run_key(account_id, run.created_at.timestamp_millis(), &run.run_id);
    Item::new(key.pk, key.sk).with_s(RUN_ID, &run.run_id).with_s(OWNER_HASH, &run.owner_hash)
}

/// True when `sk` has the shape of an account's run entry sort key (a page cursor's key).
pub fn is_account_run_sk(sk: &str) -> bool {
    sk.strip_prefix(ACCOUNT_RUN_PREFIX)
        .and_then(|rest| rest.split_once('#'))
        .is_some_and(|(t, id)| t.len() == 15 && t.bytes().all(|b| b.is_ascii_digit()) && !id.is_empty())
}

/// One entry of an account's run listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntry {
    pub run_id: String,
    pub owner_hash: String,
}

/// One page of an account's run entries, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntryPage {
    pub entries: Vec<RunEntry>,
    /// The sort key of the last entry read: where the next page starts.
    pub last_sk: Option<String>,
    pub has_more: bool,
}

/// The run entries of `account_id` after the sort key `after` (None: the newest), at most `limit`.
pub async fn runs_of_account(
    store: &dyn Store,
    account_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<RunEntryPage, ApiError> {
    let page = store.query(&account_key(account_id).pk, ACCOUNT_RUN_PREFIX, after, limit).await?;
    let entries = page
        .items
        .iter()
        .filter_map(|item| {
            Some(RunEntry { run_id: item.s(RUN_ID)?.to_owned(), owner_hash: item.s(OWNER_HASH)?.to_owned() })
        })
        .collect();
    let last_sk = page.items.last().map(|item| item.sk.clone());
    Ok(RunEntryPage { entries, last_sk, has_more: page.has_more })
}

/// The runs of `run_ids` in one read, in that order; a missing run is left out.
pub async fn runs_by_id(store: &dyn Store, run_ids: &[String]) -> Result<Vec<Run>, ApiError> {
    if run_ids.is_empty() {
        return Ok(vec![]);
    }
    let keys: Vec<Key> = run_ids.iter().map(|id| run_key(id)).collect();
    store.batch_get(&keys).await?.iter().flatten().map(run_from_item).collect()
}

/// One page of a run's events.
#[derive(Debug, Clone, PartialEq)]
pub struct EventPage {
    pub events: Vec<Event>,
    pub has_more: bool,
}

/// The events of `run_id` after `after_seq` (0: from the first), ascending, at most `limit`.
pub async fn events_after(
    store: &dyn Store,
    run_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<EventPage, ApiError> {
    let after = (after_seq > 0).then(|| event_sk(after_seq));
    let page = store.query(&run_pk(run_id), EVENT_PREFIX, after.as_deref(), limit).await?;
    let events = page.items.iter().map(event_from_item).collect::<Result<Vec<Event>, _>>()?;
    Ok(EventPage { events, has_more: page.has_more })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::{EventData, EventLog, RunStarted};
    use crate::domain::ids::RunId;
    use crate::domain::run::{Ownership, StartRequest};

    fn run() -> Run {
        let spec: StartRequest = serde_json::from_value(serde_json::json!({ "objective": "o" })).unwrap();
        let owner = Ownership { owner_ref: "o".into(), tenant_ref: "t".into(), account_ref: "a".into() };
        Run::new(&RunId::generate(), "owner-1".into(), owner, spec.validate().unwrap(), &[], chrono::Utc::now())
    }

    #[test]
    fn a_run_round_trips_through_its_item_with_rev_and_owner_beside_the_body() {
        let mut r = run();
        r.rev = 7;
        let item = run_item(&r).unwrap();
        assert_eq!(item.key(), run_key(&r.run_id));
        assert_eq!(run_from_item(&item).unwrap(), r);
        assert!(is_owned_by(&item, "owner-1"));
        assert!(!is_owned_by(&item, "owner-2"));
        assert!(run_unchanged(7).holds(Some(&item), 0));
        assert!(!run_unchanged(6).holds(Some(&item), 0));
        assert!(owned_by_cond("owner-1").holds(Some(&item), 0));
        assert!(!owned_by_cond("owner-2").holds(Some(&item), 0));
    }

    #[test]
    fn account_run_entries_sort_newest_first_and_carry_the_owner() {
        let mut old = run();
        old.created_at = chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap();
        let mut new = run();
        new.created_at = chrono::DateTime::from_timestamp_millis(1_700_000_000_001).unwrap();
        let (a, b) = (account_run_item("acct_1", &old), account_run_item("acct_1", &new));
        assert_eq!(a.pk, "ACCOUNT#acct_1");
        assert!(b.sk < a.sk, "the newer run sorts first");
        assert!(is_account_run_sk(&a.sk) && !is_account_run_sk("ROOM#x") && !is_account_run_sk("RUN#12#run_x"));
        assert_eq!(a.s(RUN_ID), Some(old.run_id.as_str()));
        assert_eq!(a.s(OWNER_HASH), Some("owner-1"));
    }

    #[test]
    fn an_event_round_trips_under_its_zero_padded_sort_key() {
        let r = run();
        let mut log = EventLog::after(&r.run_id, 0, chrono::Utc::now());
        log.push(
            1,
            EventData::RunStarted(RunStarted { database_scope: vec!["research_library".into()], max_steps: 3 }),
        );
        let e = &log.events[0];
        let item = event_item(e).unwrap();
        assert_eq!(item.key(), event_key(&r.run_id, 1));
        assert_eq!(item.sk, "EVT#00000000000000000001");
        assert_eq!(&event_from_item(&item).unwrap(), e);
    }
}
