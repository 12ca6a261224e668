//! Run events: one ordered, contiguous `seq` per run, written with the version they belong to.
//! Each kind carries its own typed `data`; the stored and wire JSON is the one the kinds
//! have always had. Depends on the run's status types only.

use chrono::{DateTime, Utc};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::run::{Authority, Completion, NextAction};

pub const EVENT_SCHEMA: &str = "helix.agent_run.event.v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    RunStarted,
    RunRecovered,
    ContinuationReceived,
    EvidenceReentered,
    IssueResolved,
    InputRequested,
    TerminalAuthorityEvaluated,
    RunWaiting,
    RunCompleted,
    RunBlocked,
    RunFailed,
    RunCancelled,
    BudgetExhausted,
}

impl EventKind {
    pub const ALL: [EventKind; 13] = [
        EventKind::RunStarted,
        EventKind::RunRecovered,
        EventKind::ContinuationReceived,
        EventKind::EvidenceReentered,
        EventKind::IssueResolved,
        EventKind::InputRequested,
        EventKind::TerminalAuthorityEvaluated,
        EventKind::RunWaiting,
        EventKind::RunCompleted,
        EventKind::RunBlocked,
        EventKind::RunFailed,
        EventKind::RunCancelled,
        EventKind::BudgetExhausted,
    ];

    /// The wire name (`run_started`, ...).
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    }

    /// Every kind's wire name with its label, for a page's script to read.
    pub fn labels() -> Vec<(String, &'static str)> {
        EventKind::ALL.iter().map(|k| (k.name(), k.label())).collect()
    }

    /// What a person reads for this kind on a timeline: the one table of human labels.
    pub fn label(self) -> &'static str {
        match self {
            EventKind::RunStarted => "Run started",
            EventKind::RunRecovered => "Recovered after an interrupted turn",
            EventKind::ContinuationReceived => "Turn started",
            EventKind::EvidenceReentered => "Evidence gathered",
            EventKind::IssueResolved => "Requirement resolved",
            EventKind::InputRequested => "Waiting for your answer",
            EventKind::TerminalAuthorityEvaluated => "Answer checked against its evidence",
            EventKind::RunWaiting => "Turn ended; more work needed",
            EventKind::RunCompleted => "Run completed",
            EventKind::RunBlocked => "Run blocked",
            EventKind::RunFailed => "Run failed",
            EventKind::RunCancelled => "Run cancelled",
            EventKind::BudgetExhausted => "Step or time budget used up",
        }
    }
}

/// One event. Serialized as `{schema, run_id, seq, kind, version, created_at, data}`, in
/// that order (stored bodies and events pages are compared byte for byte): `kind` is
/// taken from `data`, so the two cannot disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub schema: String,
    pub run_id: String,
    pub seq: u64,
    pub version: u64,
    pub created_at: DateTime<Utc>,
    pub data: EventData,
}

impl Event {
    pub fn kind(&self) -> EventKind {
        self.data.kind()
    }
}

/// The kind-specific detail of an event (identifiers, counts and statuses; never raw
/// content). Serializes as the detail alone: the kind is the event's own field.
///
/// Every payload's fields are declared in alphabetical order: the events written before
/// these types existed were built as untyped JSON objects, whose keys serde_json sorts,
/// and the bytes must stay the same.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EventData {
    RunStarted(RunStarted),
    RunRecovered(RunRecovered),
    ContinuationReceived(ContinuationReceived),
    EvidenceReentered(EvidenceReentered),
    IssueResolved(IssueResolved),
    InputRequested(InputRequested),
    TerminalAuthorityEvaluated(AuthorityEvaluated),
    RunWaiting(RunSettled),
    RunCompleted(RunSettled),
    RunBlocked(RunSettled),
    RunFailed(RunSettled),
    RunCancelled(RunCancelled),
    BudgetExhausted(BudgetExhausted),
}

impl EventData {
    pub fn kind(&self) -> EventKind {
        match self {
            Self::RunStarted(_) => EventKind::RunStarted,
            Self::RunRecovered(_) => EventKind::RunRecovered,
            Self::ContinuationReceived(_) => EventKind::ContinuationReceived,
            Self::EvidenceReentered(_) => EventKind::EvidenceReentered,
            Self::IssueResolved(_) => EventKind::IssueResolved,
            Self::InputRequested(_) => EventKind::InputRequested,
            Self::TerminalAuthorityEvaluated(_) => EventKind::TerminalAuthorityEvaluated,
            Self::RunWaiting(_) => EventKind::RunWaiting,
            Self::RunCompleted(_) => EventKind::RunCompleted,
            Self::RunBlocked(_) => EventKind::RunBlocked,
            Self::RunFailed(_) => EventKind::RunFailed,
            Self::RunCancelled(_) => EventKind::RunCancelled,
            Self::BudgetExhausted(_) => EventKind::BudgetExhausted,
        }
    }

    /// The detail of a stored event, read by its kind (the detail alone is ambiguous:
    /// four kinds share one shape).
    fn from_stored(kind: EventKind, data: serde_json::Value) -> Result<Self, serde_json::Error> {
        use serde_json::from_value as read;
        Ok(match kind {
            EventKind::RunStarted => Self::RunStarted(read(data)?),
            EventKind::RunRecovered => Self::RunRecovered(read(data)?),
            EventKind::ContinuationReceived => Self::ContinuationReceived(read(data)?),
            EventKind::EvidenceReentered => Self::EvidenceReentered(read(data)?),
            EventKind::IssueResolved => Self::IssueResolved(read(data)?),
            EventKind::InputRequested => Self::InputRequested(read(data)?),
            EventKind::TerminalAuthorityEvaluated => Self::TerminalAuthorityEvaluated(read(data)?),
            EventKind::RunWaiting => Self::RunWaiting(read(data)?),
            EventKind::RunCompleted => Self::RunCompleted(read(data)?),
            EventKind::RunBlocked => Self::RunBlocked(read(data)?),
            EventKind::RunFailed => Self::RunFailed(read(data)?),
            EventKind::RunCancelled => Self::RunCancelled(read(data)?),
            EventKind::BudgetExhausted => Self::BudgetExhausted(read(data)?),
        })
    }
}

/// `run_started`: the admitted scope and the step budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStarted {
    pub database_scope: Vec<String>,
    pub max_steps: u32,
}

/// `run_recovered`: a turn took over a claim whose lease had expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecovered {
    pub reason: RecoveryReason,
    pub step: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryReason {
    ExpiredClaim,
}

/// `continuation_received`: what the continuation carried (counts, never content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinuationReceived {
    pub answers: usize,
    pub instruction_included: bool,
    pub step: u32,
}

/// `evidence_reentered`: the refs of this turn projected onto the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceReentered {
    pub evidence_refs: Vec<String>,
    pub observation_refs: Vec<String>,
    pub receipt_refs: Vec<String>,
    pub satisfied_evidence_families: Vec<String>,
    pub step: u32,
}

/// `issue_resolved`: a pending question answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueResolved {
    pub question_id: String,
}

/// `input_requested`: the questions a turn asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRequested {
    pub question_ids: Vec<String>,
}

/// `terminal_authority_evaluated`: the verdict on the turn's terminal candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorityEvaluated {
    pub reason: Option<String>,
    pub status: Authority,
    pub step: u32,
}

/// `run_waiting`, `run_completed`, `run_blocked`, `run_failed`: where a turn left the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSettled {
    pub completion_status: Completion,
    pub failure_code: Option<String>,
    pub recommended_next_action: NextAction,
}

/// `run_cancelled`: whether the caller gave a reason, and the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCancelled {
    pub reason: Option<String>,
    pub reason_included: bool,
}

/// `budget_exhausted`: why the run ran out, after how many steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetExhausted {
    pub reason: ExhaustionReason,
    pub steps_used: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExhaustionReason {
    /// The last allowed step was used.
    MaxSteps,
    /// The run's deadline passed.
    Expired,
}

/// The stored and wire form of an event: the fields in their historical order.
#[derive(Serialize)]
struct EventOut<'a> {
    schema: &'a str,
    run_id: &'a str,
    seq: u64,
    kind: EventKind,
    version: u64,
    created_at: &'a DateTime<Utc>,
    data: &'a EventData,
}

#[derive(Deserialize)]
struct EventIn {
    schema: String,
    run_id: String,
    seq: u64,
    kind: EventKind,
    version: u64,
    created_at: DateTime<Utc>,
    data: serde_json::Value,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        EventOut {
            schema: &self.schema,
            run_id: &self.run_id,
            seq: self.seq,
            kind: self.kind(),
            version: self.version,
            created_at: &self.created_at,
            data: &self.data,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let e = EventIn::deserialize(deserializer)?;
        let data = EventData::from_stored(e.kind, e.data).map_err(D::Error::custom)?;
        Ok(Event { schema: e.schema, run_id: e.run_id, seq: e.seq, version: e.version, created_at: e.created_at, data })
    }
}

/// Collects the events of one mutation, numbering them after the run's `last_seq`.
#[derive(Debug)]
pub struct EventLog {
    run_id: String,
    next_seq: u64,
    now: DateTime<Utc>,
    pub events: Vec<Event>,
}

impl EventLog {
    pub fn after(run_id: &str, last_seq: u64, now: DateTime<Utc>) -> Self {
        Self { run_id: run_id.to_owned(), next_seq: last_seq + 1, now, events: vec![] }
    }

    pub fn push(&mut self, version: u64, data: EventData) {
        self.events.push(Event {
            schema: EVENT_SCHEMA.into(),
            run_id: self.run_id.clone(),
            seq: self.next_seq,
            version,
            created_at: self.now,
            data,
        });
        self.next_seq += 1;
    }

    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events as the untyped code wrote them (captured from it, one line per stored body),
    /// with every kind and both values of each optional field.
    const STORED: &str = include_str!("event_fixtures.jsonl");

    fn stored() -> Vec<&'static str> {
        STORED.lines().filter(|l| !l.trim().is_empty()).collect()
    }

    #[test]
    fn every_stored_event_reads_back_and_writes_the_same_bytes() {
        for line in stored() {
            let event: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(serde_json::to_string(&event).unwrap(), line);
        }
    }

    #[test]
    fn the_fixtures_cover_every_kind() {
        let kinds: Vec<EventKind> = stored().iter().map(|l| serde_json::from_str::<Event>(l).unwrap().kind()).collect();
        for kind in EventKind::ALL {
            assert!(kinds.contains(&kind), "{kind:?} has no fixture");
        }
    }

    #[test]
    fn pushed_events_serialize_as_the_untyped_events_did() {
        let now: DateTime<Utc> = "2026-11-30T10:00:00.123456Z".parse().unwrap();
        let mut log = EventLog::after("run_0123456789abcdef0123", 0, now);
        log.push(
            1,
            EventData::RunStarted(RunStarted { database_scope: vec!["research_library".into()], max_steps: 12 }),
        );
        log.push(2, EventData::RunRecovered(RunRecovered { reason: RecoveryReason::ExpiredClaim, step: 2 }));
        log.push(
            2,
            EventData::ContinuationReceived(ContinuationReceived { answers: 2, instruction_included: true, step: 2 }),
        );
        let written: Vec<String> = log.events.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
        assert_eq!(written, stored()[..3]);
        assert_eq!(log.last_seq(), 3);
    }

    #[test]
    fn a_stored_event_whose_data_does_not_fit_its_kind_is_refused() {
        let line = stored()[0].replace(r#""kind":"run_started""#, r#""kind":"issue_resolved""#);
        assert!(serde_json::from_str::<Event>(&line).is_err());
    }

    #[test]
    fn the_four_settled_kinds_share_one_shape_and_keep_their_own_kind() {
        let settled = RunSettled {
            completion_status: Completion::Blocked,
            failure_code: None,
            recommended_next_action: NextAction::Continue,
        };
        let mut log = EventLog::after("run_0123456789abcdef0123", 0, Utc::now());
        for data in [EventData::RunWaiting, EventData::RunCompleted, EventData::RunBlocked, EventData::RunFailed] {
            log.push(2, data(settled.clone()));
        }
        let read: Vec<EventKind> = log
            .events
            .iter()
            .map(|e| serde_json::from_str::<Event>(&serde_json::to_string(e).unwrap()).unwrap().kind())
            .collect();
        assert_eq!(read, [EventKind::RunWaiting, EventKind::RunCompleted, EventKind::RunBlocked, EventKind::RunFailed]);
    }
}
