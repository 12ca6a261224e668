//! Workflow states, the one table of legal transitions, and the verification of a step's
//! postcondition from the connector's reported observation (never from its "ok"). No I/O.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::Step;
use super::protocol::{Ack, AckStatus, StepObservation};

/// The state of a workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowState {
    Queued,
    Dispatched,
    Running,
    Verifying,
    Succeeded,
    /// Failed with a typed reason (`postcondition_unmet`, `step_failed`, ...).
    Failed,
    /// Refused before any world change.
    Rejected,
    TimedOut,
    /// Manual override, authority or lease lapse, or a connector epoch change; waits for
    /// an explicit `resume`.
    Paused,
    CancelRequested,
    Cancelled,
    /// Emergency Stop (terminal).
    Stopped,
    /// A mutation may have happened but was not confirmed: never retried blindly.
    OutcomeUnknown,
    Expired,
}

use WorkflowState::*;

/// Every legal transition, as one table: (from, to).
pub const TRANSITIONS: &[(WorkflowState, WorkflowState)] = &[
    (Queued, Dispatched),
    (Queued, Rejected),
    (Queued, CancelRequested),
    (Queued, Cancelled),
    (Queued, Stopped),
    (Queued, Paused),
    (Queued, Expired),
    (Dispatched, Running),
    (Dispatched, Verifying),
    (Dispatched, Failed),
    (Dispatched, Rejected),
    (Dispatched, Paused),
    (Dispatched, CancelRequested),
    (Dispatched, Stopped),
    (Dispatched, TimedOut),
    (Dispatched, OutcomeUnknown),
    (Running, Running),
    (Running, Verifying),
    (Running, Failed),
    (Running, Paused),
    (Running, CancelRequested),
    (Running, Stopped),
    (Running, TimedOut),
    (Running, OutcomeUnknown),
    (Verifying, Succeeded),
    (Verifying, Failed),
    (Verifying, Dispatched),
    (Verifying, Paused),
    (Verifying, CancelRequested),
    (Verifying, Stopped),
    (Verifying, TimedOut),
    (Verifying, OutcomeUnknown),
    (Paused, Queued),
    (Paused, Cancelled),
    (Paused, Stopped),
    (Paused, Expired),
    (CancelRequested, Cancelled),
    (CancelRequested, Stopped),
    (CancelRequested, OutcomeUnknown),
];

impl WorkflowState {
    /// No transition leaves a terminal state.
    pub fn is_terminal(self) -> bool {
        matches!(self, Succeeded | Failed | Rejected | TimedOut | Cancelled | Stopped | OutcomeUnknown | Expired)
    }

    /// Whether `self -> to` is in the table.
    pub fn may_become(self, to: WorkflowState) -> bool {
        TRANSITIONS.contains(&(self, to))
    }

    /// Whether a connector holds (or may hold) the workflow's command: its effects may
    /// still arrive late.
    pub fn at_connector(self) -> bool {
        matches!(self, Dispatched | Running | Verifying | CancelRequested)
    }
}

/// An acknowledgement that arrived after Helix took the command from the connector (an
/// Emergency Stop, a cancel, a pause, a deadline): what the connector says happened, kept
/// in the workflow's record (its effect on the world is reported, never dropped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LateAck {
    /// The step it is about (0-based).
    pub step: u32,
    pub status: AckStatus,
    /// Whether the reported observation shows the step's effect (null: none reported).
    pub postcondition_met: Option<bool>,
    /// The connector's short reason (`failed`, `rejected`).
    pub reason: Option<String>,
    pub received_at: String,
}

impl LateAck {
    /// The record of an acknowledgement of `step`, received at `now`.
    pub fn of(step_index: u32, step: &Step, ack: &Ack, now: String) -> LateAck {
        LateAck {
            step: step_index,
            status: ack.status,
            postcondition_met: ack.observation.as_ref().map(|o| postcondition_met(step, o)),
            reason: ack.reason.clone(),
            received_at: now,
        }
    }

    /// Whether it says the step may have changed the world.
    pub fn may_have_effect(&self, step: &Step) -> bool {
        step.mutates() && matches!(self.status, AckStatus::Completed | AckStatus::Interrupted)
    }
}

/// Checks a step's postcondition against the reported observation: `true` only when
/// the observation shows the step's effect.
pub fn postcondition_met(step: &Step, o: &StepObservation) -> bool {
    match step {
        Step::MoveTo(m) => o.position.is_some_and(|[x, y, z]| {
            let r = i64::from(m.range);
            (i64::from(x) - i64::from(m.x)).abs() <= r
                && (i64::from(y) - i64::from(m.y)).abs() <= r
                && (i64::from(z) - i64::from(m.z)).abs() <= r
        }),
        Step::BreakBlock(_) => o.block_at_target.as_deref() == Some("minecraft:air"),
        Step::PlaceBlock(p) => o.block_at_target.as_deref() == Some(p.item.as_str()),
        Step::Equip(e) => o.equipped.as_deref() == Some(e.item.as_str()),
        Step::Craft(c) => o
            .inventory_delta
            .as_ref()
            .is_some_and(|d| d.iter().any(|(item, n)| item == &c.item && *n >= i32::from(c.times))),
        Step::Chat(c) => o.chat_echo.as_deref() == Some(c.text.as_str()),
        // Nothing in the world to check: the connector's completion is the observation.
        Step::LookAt(_) | Step::Stop(_) | Step::Wait(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::embodiment::action::{Action, MoveTo};
    use serde_json::json;

    const ALL: &[WorkflowState] = &[
        Queued,
        Dispatched,
        Running,
        Verifying,
        Succeeded,
        Failed,
        Rejected,
        TimedOut,
        Paused,
        CancelRequested,
        Cancelled,
        Stopped,
        OutcomeUnknown,
        Expired,
    ];

    #[test]
    fn terminal_states_have_no_way_out_and_every_state_is_reachable() {
        for &(from, to) in TRANSITIONS {
            assert!(!from.is_terminal(), "{from:?} -> {to:?} leaves a terminal state");
        }
        for &s in ALL {
            assert!(s == Queued || TRANSITIONS.iter().any(|&(_, to)| to == s), "{s:?} unreachable");
        }
        assert!(Paused.may_become(Queued) && !Stopped.may_become(Queued) && !Succeeded.may_become(Failed));
        // Stopped is reachable from every live state (Emergency Stop).
        for &s in ALL.iter().filter(|s| !s.is_terminal()) {
            assert!(s.may_become(Stopped), "{s:?}");
        }
    }

    #[test]
    fn rejected_and_expired_are_reached_only_before_any_step_ran() {
        // `rejected`: refused at dispatch (queued) or by the connector instead of accepting
        // (dispatched); `expired`: waited too long in the queue (or paused).
        let into = |to: WorkflowState| -> Vec<WorkflowState> {
            TRANSITIONS.iter().filter(|&&(_, t)| t == to).map(|&(f, _)| f).collect()
        };
        assert_eq!(into(Rejected), [Queued, Dispatched]);
        assert_eq!(into(Expired), [Queued, Paused]);
        // A lease lapse before dispatch pauses a queued workflow; resume queues it again.
        assert!(Queued.may_become(Paused) && Paused.may_become(Queued));
        assert!(!Running.may_become(Rejected) && !Dispatched.may_become(Expired));
        assert!(Rejected.is_terminal() && Expired.is_terminal() && !Rejected.at_connector());
    }

    #[test]
    fn the_stored_state_names_are_the_contracts() {
        let names: Vec<String> =
            ALL.iter().map(|s| serde_json::to_value(s).unwrap().as_str().unwrap().to_owned()).collect();
        assert_eq!(
            names,
            [
                "queued",
                "dispatched",
                "running",
                "verifying",
                "succeeded",
                "failed",
                "rejected",
                "timed_out",
                "paused",
                "cancel_requested",
                "cancelled",
                "stopped",
                "outcome_unknown",
                "expired"
            ]
        );
    }

    #[test]
    fn a_move_is_verified_from_the_reported_position_within_its_range() {
        let step = Step::MoveTo(MoveTo { x: 10, y: 64, z: -5, range: 1 });
        let at = |x, y, z| StepObservation { position: Some([x, y, z]), ..Default::default() };
        assert!(postcondition_met(&step, &at(10, 64, -5)));
        assert!(postcondition_met(&step, &at(11, 64, -4)));
        assert!(!postcondition_met(&step, &at(12, 64, -5)), "two blocks off with range 1");
        assert!(!postcondition_met(&step, &StepObservation::default()), "no position: not verified");
        let chat = Action::parse(&json!({"type": "chat", "text": "hi"})).unwrap().steps().remove(0);
        assert!(!postcondition_met(&chat, &StepObservation { chat_echo: Some("ho".into()), ..Default::default() }));
    }
}
