//! Workflows (a player's accepted actions), their open markers and the per-minute action
//! counter, as stored. Knows no use case.

use serde::{Deserialize, Serialize};

use super::*;

// ---------- workflows ----------

/// A workflow as stored (with the subject's native id, which never leaves southbound).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowRecord {
    pub workflow_ref: String,
    pub room_id: String,
    pub binding_id: String,
    pub account_id: String,
    pub subject_ref: String,
    pub native_id: String,
    pub action: Action,
    pub steps: Vec<Step>,
    pub state: WorkflowState,
    pub reason: Option<String>,
    /// The current step (0-based); `steps.len()` once all are done.
    pub step_index: u32,
    pub block_changes: u32,
    /// The lease of the command at the connector (rotated at each dispatch).
    pub lease_token: Option<String>,
    /// The connector epoch the command was dispatched under.
    pub dispatch_epoch: Option<u64>,
    /// Epoch milliseconds by which the current step must end.
    pub deadline_ms: Option<i64>,
    /// The highest acknowledgement sequence applied under the current lease.
    pub last_seq: u32,
    pub last_observation: Option<StepObservation>,
    pub last_observation_at: Option<String>,
    /// Helix took a mutating step from the connector that held it: effects may arrive.
    #[serde(default)]
    pub late_effects: bool,
    /// The command Helix last took from the connector (its late acknowledgements are recorded).
    #[serde(default)]
    pub withdrawn: Option<Withdrawn>,
    /// The acknowledgements of a withdrawn command, oldest first (at most [`MAX_LATE_ACKS`]).
    #[serde(default)]
    pub late_acks: Vec<LateAck>,
    /// Epoch seconds the workflow was last queued (accepted, or resumed); 0 in records
    /// written before it existed (then `created_at` counts).
    #[serde(default)]
    pub queued_at: i64,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip)]
    pub rev: i64,
}

/// Most late acknowledgements one workflow keeps (beyond, the newest replaces the last).
pub const MAX_LATE_ACKS: usize = 16;

/// A command Helix took from the connector: its lease, step and last applied sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withdrawn {
    pub lease_token: String,
    pub step_index: u32,
    pub last_seq: u32,
}

impl WorkflowRecord {
    pub fn key(&self) -> Key {
        workflow_key(&self.room_id, &self.workflow_ref)
    }

    pub fn to_item(&self) -> Item {
        let k = self.key();
        let state = serde_json::to_value(self.state).expect("a state serializes");
        Item::new(k.pk, k.sk).with_s(BODY, json(self)).with_n(REV, self.rev).with_s(STATE, state.as_str().unwrap_or(""))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let w: WorkflowRecord = read(item, "workflow")?;
        Ok(WorkflowRecord { rev: item.n(REV).unwrap_or(0), ..w })
    }

    pub fn next(&self) -> Self {
        WorkflowRecord { rev: self.rev + 1, ..self.clone() }
    }

    /// The workflow's put, conditional on revision `read_rev`, with its open marker (a
    /// copy, deleted with a terminal state) and the binding's work marker set pending: the
    /// connector's next poll reads its open workflows again.
    pub fn write(&self, tx: &mut Tx, read_rev: i64) {
        self.write_from_poll(tx, read_rev);
        tx.put(Role::WorkMarker, WorkMarker::pending_item(&self.binding_id), None);
    }

    /// The same write made by the connector's own poll (a dispatch, an acknowledgement):
    /// that poll answers from what it wrote, so the work marker stays as it is.
    pub fn write_from_poll(&self, tx: &mut Tx, read_rev: i64) {
        tx.put(Role::Workflow, self.to_item(), unchanged_since(read_rev));
        if self.state.is_terminal() {
            tx.delete(Role::OpenMarker, open_key(&self.binding_id, &self.workflow_ref), None);
        } else {
            tx.put(Role::OpenMarker, self.open_item(), None);
        }
    }

    /// A new workflow and its open marker (both absent before); the work marker pending.
    pub fn create(&self, tx: &mut Tx) {
        tx.put(Role::Workflow, self.to_item(), Cond::NotExists);
        tx.put(Role::OpenMarker, self.open_item(), Cond::NotExists);
        tx.put(Role::WorkMarker, WorkMarker::pending_item(&self.binding_id), None);
    }

    /// The open marker: the workflow's copy under its binding's partition (one query reads
    /// every open workflow of a binding).
    fn open_item(&self) -> Item {
        let k = open_key(&self.binding_id, &self.workflow_ref);
        Item { pk: k.pk, sk: k.sk, attrs: self.to_item().attrs }
    }
}

/// The per-minute counter of the actions accepted for one subject of a binding (counted
/// atomically in the store: the limit holds across processes).
pub fn subject_action_counter(binding_id: &str, native_id: &str, minute: i64) -> Key {
    super::super::limits::counter_key(&format!("subject-actions:{binding_id}:{native_id}"), minute)
}

pub async fn read_workflow(
    store: &dyn Store,
    room_id: &str,
    workflow_ref: &str,
) -> Result<Option<WorkflowRecord>, ApiError> {
    store.get(&workflow_key(room_id, workflow_ref)).await?.as_ref().map(WorkflowRecord::from_item).transpose()
}

/// The open (non-terminal) workflows of a binding, in marker order (at most `limit`): one
/// query. A marker of the older shape (the room id only) is read through one BatchGetItem.
pub async fn open_workflows(
    store: &dyn Store,
    room_id: &str,
    binding_id: &str,
    limit: usize,
) -> Result<Vec<WorkflowRecord>, ApiError> {
    let page = store.query(&open_key(binding_id, "").pk, OPEN_PREFIX, None, limit).await?;
    let mut found: Vec<Option<WorkflowRecord>> = Vec::with_capacity(page.items.len());
    let mut older = Vec::new();
    for item in &page.items {
        match WorkflowRecord::from_item(item) {
            Ok(w) => found.push(Some(w)),
            Err(_) => {
                if let Some(r) = item.sk.strip_prefix(OPEN_PREFIX) {
                    older.push((found.len(), workflow_key(room_id, r)));
                    found.push(None);
                }
            }
        }
    }
    if !older.is_empty() {
        let keys: Vec<Key> = older.iter().map(|(_, k)| k.clone()).collect();
        for ((at, _), item) in older.iter().zip(store.batch_get(&keys).await?) {
            found[*at] = item.as_ref().map(WorkflowRecord::from_item).transpose()?;
        }
    }
    Ok(found.into_iter().flatten().collect())
}
