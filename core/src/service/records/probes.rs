//! Environment probes in the table. Partition `SRCPROBE#<source_id>`, so a source can only
//! ever see and answer its own probes: `PROBE#<probe_id>` (the record: pending, answered
//! or expired; kept for the observation TTL) and `PENDING#<probe_id>` (present only while
//! the probe may be answered; TTL at its answer deadline; what a poll reads).
//! Must not depend on `http`, `mcp` or any use-case module.

use super::BODY;
use super::attrs::{
    ANSWER_UNTIL_MS, BINDING_REF, CAPABILITY, OBSERVATION_REF, PROBE_ID, REQUESTED_AT_MS, ROOM_ID, RUN_ID, SOURCE_ID,
    STATUS, STEP, WORLD_ID, set_s, text,
};
use super::observations::StoredObservation;
use super::tx::{Role, Tx};
use super::{enum_parse, enum_text};
use crate::domain::source::ProbeStatus;
use crate::error::ApiError;
use crate::store::{Cond, EXPIRES_AT, Item, Key, Store, StoreError};

const PENDING_PREFIX: &str = "PENDING#";

fn probes_pk(source_id: &str) -> String {
    format!("SRCPROBE#{source_id}")
}

pub fn probe_key(source_id: &str, probe_id: &str) -> Key {
    Key::new(probes_pk(source_id), format!("PROBE#{probe_id}"))
}

pub fn pending_key(source_id: &str, probe_id: &str) -> Key {
    Key::new(probes_pk(source_id), format!("{PENDING_PREFIX}{probe_id}"))
}

/// One probe as stored: what was asked of which source for which turn, until when, and
/// (once answered) the answer as a stored observation.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRecord {
    pub probe_id: String,
    pub source_id: String,
    pub room_id: String,
    pub world_id: String,
    pub run_id: String,
    pub step: u32,
    pub binding_ref: String,
    pub capability: String,
    pub requested_at_ms: i64,
    pub answer_until_ms: i64,
    /// None for a status this code does not know (read as not pending).
    pub status: Option<ProbeStatus>,
    pub expires_at: i64,
    pub answer: Option<StoredObservation>,
}

impl ProbeRecord {
    pub fn key(&self) -> Key {
        probe_key(&self.source_id, &self.probe_id)
    }

    pub fn to_item(&self) -> Result<Item, ApiError> {
        let key = self.key();
        let mut item = Item::new(key.pk, key.sk)
            .with_s(PROBE_ID, &self.probe_id)
            .with_s(SOURCE_ID, &self.source_id)
            .with_s(ROOM_ID, &self.room_id)
            .with_s(WORLD_ID, &self.world_id)
            .with_s(RUN_ID, &self.run_id)
            .with_n(STEP, self.step as i64)
            .with_s(BINDING_REF, &self.binding_ref)
            .with_s(CAPABILITY, &self.capability)
            .with_n(REQUESTED_AT_MS, self.requested_at_ms)
            .with_n(ANSWER_UNTIL_MS, self.answer_until_ms)
            .with_n(EXPIRES_AT, self.expires_at);
        set_s(&mut item, STATUS, self.status.map(|s| enum_text(&s)).as_deref());
        if let Some(answer) = &self.answer {
            item = item.with_s(BODY, answer.to_body()?).with_s(OBSERVATION_REF, &answer.observation_ref);
        }
        Ok(item)
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let s = |n: &str| text(item, n);
        Ok(ProbeRecord {
            probe_id: s(PROBE_ID),
            source_id: s(SOURCE_ID),
            room_id: s(ROOM_ID),
            world_id: s(WORLD_ID),
            run_id: s(RUN_ID),
            step: item.n(STEP).unwrap_or(0) as u32,
            binding_ref: s(BINDING_REF),
            capability: s(CAPABILITY),
            requested_at_ms: item.n(REQUESTED_AT_MS).unwrap_or(0),
            answer_until_ms: item.n(ANSWER_UNTIL_MS).unwrap_or(0),
            status: item.s(STATUS).and_then(enum_parse),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
            answer: item.s(BODY).map(StoredObservation::from_body).transpose()?,
        })
    }

    /// The marker a poll reads while the probe may be answered (TTL: its deadline).
    pub fn pending(&self) -> PendingProbe {
        PendingProbe {
            probe_id: self.probe_id.clone(),
            world_id: self.world_id.clone(),
            capability: self.capability.clone(),
            requested_at_ms: self.requested_at_ms,
            answer_until_ms: self.answer_until_ms,
            expires_at: self.answer_until_ms.div_euclid(1000) + 1,
        }
    }

    /// Queues the probe: the record and its pending marker, both new.
    pub fn queue(&self, tx: &mut Tx) -> Result<(), ApiError> {
        tx.put(Role::Probe, self.to_item()?, Cond::NotExists);
        tx.put(Role::PendingProbe, self.pending().to_item(&self.source_id), Cond::NotExists);
        Ok(())
    }

    /// Writes the record in its new state, only if it was still pending, and deletes the
    /// pending marker (with `marker_must_exist`, only if it is still there).
    pub fn leave_pending(&self, tx: &mut Tx, marker_must_exist: bool) -> Result<(), ApiError> {
        tx.put(Role::Probe, self.to_item()?, still_pending());
        tx.delete(
            Role::PendingProbe,
            pending_key(&self.source_id, &self.probe_id),
            marker_must_exist.then_some(Cond::Exists),
        );
        Ok(())
    }
}

/// The record is still pending: its answer and its close race on this condition.
fn still_pending() -> Cond {
    Cond::eq_s(STATUS, enum_text(&ProbeStatus::Pending))
}

/// The status of a stored probe record (None: absent, or a status this code does not know).
pub fn status_of(item: Option<&Item>) -> Option<ProbeStatus> {
    item?.s(STATUS).and_then(enum_parse)
}

/// A probe's pending marker: what its producer's poll sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingProbe {
    pub probe_id: String,
    pub world_id: String,
    pub capability: String,
    pub requested_at_ms: i64,
    pub answer_until_ms: i64,
    pub expires_at: i64,
}

impl PendingProbe {
    pub fn to_item(&self, source_id: &str) -> Item {
        let key = pending_key(source_id, &self.probe_id);
        Item::new(key.pk, key.sk)
            .with_s(PROBE_ID, &self.probe_id)
            .with_s(WORLD_ID, &self.world_id)
            .with_s(CAPABILITY, &self.capability)
            .with_n(REQUESTED_AT_MS, self.requested_at_ms)
            .with_n(ANSWER_UNTIL_MS, self.answer_until_ms)
            .with_n(EXPIRES_AT, self.expires_at)
    }

    pub fn from_item(item: &Item) -> Self {
        let s = |n: &str| text(item, n);
        PendingProbe {
            probe_id: s(PROBE_ID),
            world_id: s(WORLD_ID),
            capability: s(CAPABILITY),
            requested_at_ms: item.n(REQUESTED_AT_MS).unwrap_or(0),
            answer_until_ms: item.n(ANSWER_UNTIL_MS).unwrap_or(0),
            expires_at: item.n(EXPIRES_AT).unwrap_or(0),
        }
    }
}

/// At most `limit` pending markers of a source (the store hides those past their TTL;
/// the caller still checks the deadline, whose clock is the service's).
pub async fn pending_probes_of_source(
    store: &dyn Store,
    source_id: &str,
    limit: usize,
) -> Result<Vec<PendingProbe>, StoreError> {
    let page = store.query(&probes_pk(source_id), PENDING_PREFIX, None, limit).await?;
    Ok(page.items.iter().map(PendingProbe::from_item).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(status: ProbeStatus) -> ProbeRecord {
        ProbeRecord {
            probe_id: "prb_1".into(),
            source_id: "src_1".into(),
            room_id: "room_1".into(),
            world_id: "w".into(),
            run_id: "run_1".into(),
            step: 1,
            binding_ref: "rrb_1".into(),
            capability: "c".into(),
            requested_at_ms: 1_000,
            answer_until_ms: 9_500,
            status: Some(status),
            expires_at: 4_000,
            answer: None,
        }
    }

    #[test]
    fn a_pending_marker_lives_until_just_past_the_answer_deadline() {
        let marker = probe(ProbeStatus::Pending).pending();
        assert_eq!(marker.expires_at, 10, "the second after 9.5 s");
        assert_eq!(pending_key("src_1", "prb_1").pk, probe_key("src_1", "prb_1").pk, "one partition per source");
    }

    #[test]
    fn a_probe_leaves_pending_only_from_pending() {
        for (stored, leaves) in
            [(ProbeStatus::Pending, true), (ProbeStatus::Answered, false), (ProbeStatus::Expired, false)]
        {
            let item = probe(stored).to_item().unwrap();
            assert_eq!(still_pending().holds(Some(&item), 0), leaves, "{stored:?}");
            assert_eq!(status_of(Some(&item)), Some(stored));
        }
        let mut tx = Tx::new();
        probe(ProbeStatus::Expired).leave_pending(&mut tx, false).unwrap();
        assert!(tx.has(Role::Probe) && tx.has(Role::PendingProbe));
        assert_eq!(status_of(None), None);
    }
}
