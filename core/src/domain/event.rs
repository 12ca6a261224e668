//! Run events: one ordered, contiguous `seq` per run, written with the version they belong to.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub schema: String,
    pub run_id: String,
    pub seq: u64,
    pub kind: EventKind,
    pub version: u64,
    pub created_at: DateTime<Utc>,
    pub data: serde_json::Value,
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

    pub fn push(&mut self, kind: EventKind, version: u64, data: serde_json::Value) {
        self.events.push(Event {
            schema: EVENT_SCHEMA.into(),
            run_id: self.run_id.clone(),
            seq: self.next_seq,
            kind,
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
