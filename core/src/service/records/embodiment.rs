//! Minecraft Player Embodiment in the table: the environment binding (one action-connector
//! pairing of a room and world: its credential hash, connector epoch, manifest, subject
//! directory with native ids, member selections with their control leases, Emergency
//! Stop), the credential lookup, workflows and their open markers (what a poll reads).
//! Bodies are JSON under `body`; the guards a write is conditional on (`rev`, the epoch,
//! the stop flag) are attributes too. Secrets are only ever hashes here. Knows no use case.

use serde::{Deserialize, Serialize};

use super::BODY;
use super::accounts::account_key;
use super::attrs::{CONNECTOR_EPOCH, ESTOP_ACTIVE, REV, STATE};
use super::rooms::{member_is_owner, member_key, room_active_and_owned_by, room_key, room_pk};
use super::tx::{Role, Tx};
use crate::domain::embodiment::{Action, Step, StepObservation, WorkflowState};
use crate::error::ApiError;
use crate::store::{Cond, Item, Key, Store};

const ENV_PREFIX: &str = "ENV#";
const WORKFLOW_PREFIX: &str = "EMBWF#";
const OPEN_PREFIX: &str = "WF#";

pub fn env_key(room_id: &str, binding_id: &str) -> Key {
    Key::new(room_pk(room_id), format!("{ENV_PREFIX}{binding_id}"))
}
/// The lookup of a connector credential by its hash: how a connector request finds its binding.
pub fn credential_key(credential_hash: &str) -> Key {
    Key::new(format!("EMBCRED#{credential_hash}"), "CRED")
}
pub fn workflow_key(room_id: &str, workflow_ref: &str) -> Key {
    Key::new(room_pk(room_id), format!("{WORKFLOW_PREFIX}{workflow_ref}"))
}
/// The marker of a workflow that is not terminal yet, under its binding.
pub fn open_key(binding_id: &str, workflow_ref: &str) -> Key {
    Key::new(format!("EMBOPEN#{binding_id}"), format!("{OPEN_PREFIX}{workflow_ref}"))
}

fn flag(v: bool) -> &'static str {
    if v { "true" } else { "false" }
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("a record serializes")
}

fn read<T: for<'de> Deserialize<'de>>(item: &Item, what: &str) -> Result<T, ApiError> {
    let body = item.s(BODY).ok_or_else(|| ApiError::internal(std::io::Error::other(format!("{what} without body"))))?;
    serde_json::from_str(body).map_err(ApiError::internal)
}

// ---------- the environment binding ----------

/// One subject of the directory, with its native id (never shown northbound).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectEntry {
    pub subject_ref: String,
    pub native_id: String,
    pub display_name: String,
    pub online: bool,
}

/// A member's selected subject and its control lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    pub account_id: String,
    pub subject_ref: String,
    /// Epoch seconds.
    pub lease_until: i64,
}

/// A member's Emergency Stop of one subject: only a person clears it, in the browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectStop {
    pub native_id: String,
    pub account_id: String,
    pub stopped_at: String,
}

/// The guard attribute a subject's stop sets on the binding item (a hash: native ids
/// are the connector's text and never become attribute names).
fn subject_stop_attr(native_id: &str) -> String {
    let h = crate::domain::hash_parts(&["subject_stop.v1", native_id]);
    format!("subject_stop_{}", &h[..24])
}

/// What the registered connector declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredConnector {
    pub connector_name: String,
    pub connector_version: String,
    pub schema_hash: String,
    pub capabilities: Vec<String>,
    pub registered_at: String,
}

/// An environment binding as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvBinding {
    pub binding_id: String,
    pub room_id: String,
    pub world_id: String,
    pub owner_account: String,
    pub credential_hash: String,
    /// `active` or `revoked`.
    pub status: String,
    /// Raised by each registration (0: never registered).
    pub epoch: u64,
    pub connector: Option<RegisteredConnector>,
    /// Epoch seconds of the connector's last poll (written at most every few seconds).
    pub last_seen: i64,
    pub directory_generation: u64,
    pub subjects: Vec<SubjectEntry>,
    pub selections: Vec<Selection>,
    pub estop_generation: u64,
    pub estop_active: bool,
    /// Members' Emergency Stops of one subject each (by native id, so a changed
    /// directory does not lift them); each is also a guard attribute of the item.
    #[serde(default)]
    pub subject_stops: Vec<SubjectStop>,
    pub created_at: String,
    /// The optimistic-concurrency revision every write is conditional on.
    #[serde(skip)]
    pub rev: i64,
}

impl EnvBinding {
    pub fn key(&self) -> Key {
        env_key(&self.room_id, &self.binding_id)
    }

    pub fn to_item(&self) -> Item {
        let k = self.key();
        let item = Item::new(k.pk, k.sk)
            .with_s(BODY, json(self))
            .with_n(REV, self.rev)
            .with_n(CONNECTOR_EPOCH, self.epoch as i64)
            .with_s(ESTOP_ACTIVE, flag(self.estop_active));
        self.subject_stops.iter().fold(item, |i, s| i.with_s(&subject_stop_attr(&s.native_id), flag(true)))
    }

    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        let b: EnvBinding = read(item, "environment binding")?;
        Ok(EnvBinding { rev: item.n(REV).unwrap_or(0), ..b })
    }

    pub fn is_active(&self) -> bool {
        self.status == "active"
    }

    /// The next revision of this binding (the caller changes its fields).
    pub fn next(&self) -> Self {
        EnvBinding { rev: self.rev + 1, ..self.clone() }
    }

    /// The binding's put, conditional on nobody having written it since `self` was read.
    pub fn write(&self, tx: &mut Tx, read_rev: i64) {
        tx.put(Role::EnvBinding, self.to_item(), unchanged_since(read_rev));
    }

    /// A check that the binding is still at revision `rev` when the write commits.
    pub fn check_unchanged(&self, tx: &mut Tx) {
        tx.check(Role::EnvBinding, self.key(), unchanged_since(self.rev));
    }

    pub fn selection_of(&self, account: &str) -> Option<&Selection> {
        self.selections.iter().find(|s| s.account_id == account)
    }

    pub fn subject(&self, subject_ref: &str) -> Option<&SubjectEntry> {
        self.subjects.iter().find(|s| s.subject_ref == subject_ref)
    }

    /// A member's Emergency Stop of this subject is active.
    pub fn subject_stopped(&self, native_id: &str) -> bool {
        self.subject_stops.iter().any(|s| s.native_id == native_id)
    }

    /// Another member holds `subject_ref` under a live lease at `now`.
    pub fn held_by_other(&self, subject_ref: &str, account: &str, now: i64) -> bool {
        self.selections.iter().any(|s| s.subject_ref == subject_ref && s.account_id != account && s.lease_until > now)
    }
}

/// Nobody wrote the item since revision `rev` (a new item: `rev` 0 and absent).
pub fn unchanged_since(rev: i64) -> Cond {
    if rev == 0 { Cond::NotExists } else { Cond::eq_n(REV, rev) }
}

/// The binding still admits writes of a connector at `epoch` (no newer registration).
pub fn at_epoch(epoch: u64) -> Cond {
    Cond::eq_n(CONNECTOR_EPOCH, epoch as i64)
}

/// No Emergency Stop is active on the binding.
pub fn not_stopped() -> Cond {
    Cond::eq_s(ESTOP_ACTIVE, flag(false))
}

/// Neither the binding's Emergency Stop nor one of the subject `native_id` is active.
pub fn not_stopped_for(native_id: &str) -> Cond {
    Cond::And(vec![not_stopped(), Cond::Missing(subject_stop_attr(native_id))])
}

/// The lookup from a credential hash to its binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialLookup {
    pub room_id: String,
    pub binding_id: String,
    pub owner_account: String,
}

impl CredentialLookup {
    pub fn to_item(&self, credential_hash: &str) -> Item {
        let k = credential_key(credential_hash);
        Item::new(k.pk, k.sk).with_s(BODY, json(self))
    }
    pub fn from_item(item: &Item) -> Result<Self, ApiError> {
        read(item, "connector credential lookup")
    }
}

/// A binding read with its room, the owner's membership and (with `with_account`) the
/// owner's account item: one BatchGetItem.
pub struct BindingInRoom {
    pub binding: Option<EnvBinding>,
    /// The room is active and owned by `account`, who is its owner member.
    pub owner_holds: bool,
    pub account: Option<Item>,
}

pub async fn binding_in_room(
    store: &dyn Store,
    room_id: &str,
    binding_id: &str,
    account: &str,
    with_account: bool,
) -> Result<BindingInRoom, ApiError> {
    let mut keys = vec![env_key(room_id, binding_id), room_key(room_id), member_key(room_id, account)];
    if with_account {
        keys.push(account_key(account));
    }
    let mut got = store.batch_get(&keys).await?.into_iter();
    let (binding, room, member) = (got.next().flatten(), got.next().flatten(), got.next().flatten());
    Ok(BindingInRoom {
        binding: binding.as_ref().map(EnvBinding::from_item).transpose()?,
        owner_holds: room_active_and_owned_by(account).holds(room.as_ref(), 0)
            && member_is_owner().holds(member.as_ref(), 0),
        account: got.next().flatten(),
    })
}

/// The environment bindings of a room (at most `limit`).
pub async fn bindings_of_room(store: &dyn Store, room_id: &str, limit: usize) -> Result<Vec<EnvBinding>, ApiError> {
    let page = store.query(&room_pk(room_id), ENV_PREFIX, None, limit).await?;
    page.items.iter().map(EnvBinding::from_item).collect()
}

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
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip)]
    pub rev: i64,
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

    /// The workflow's put, conditional on revision `read_rev`; its open marker goes with a
    /// terminal state.
    pub fn write(&self, tx: &mut Tx, read_rev: i64) {
        tx.put(Role::Workflow, self.to_item(), unchanged_since(read_rev));
        if self.state.is_terminal() {
            tx.delete(Role::OpenMarker, open_key(&self.binding_id, &self.workflow_ref), None);
        }
    }

    /// A new workflow and its open marker (both absent before).
    pub fn create(&self, tx: &mut Tx) {
        tx.put(Role::Workflow, self.to_item(), Cond::NotExists);
        let k = open_key(&self.binding_id, &self.workflow_ref);
        tx.put(Role::OpenMarker, Item::new(k.pk, k.sk).with_s(BODY, json(&self.room_id)), Cond::NotExists);
    }
}

pub async fn read_workflow(
    store: &dyn Store,
    room_id: &str,
    workflow_ref: &str,
) -> Result<Option<WorkflowRecord>, ApiError> {
    store.get(&workflow_key(room_id, workflow_ref)).await?.as_ref().map(WorkflowRecord::from_item).transpose()
}

/// The open (non-terminal) workflows of a binding, oldest marker first (at most `limit`):
/// one query and one BatchGetItem.
pub async fn open_workflows(
    store: &dyn Store,
    room_id: &str,
    binding_id: &str,
    limit: usize,
) -> Result<Vec<WorkflowRecord>, ApiError> {
    let page = store.query(&open_key(binding_id, "").pk, OPEN_PREFIX, None, limit).await?;
    if page.items.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<Key> =
        page.items.iter().filter_map(|i| i.sk.strip_prefix(OPEN_PREFIX).map(|r| workflow_key(room_id, r))).collect();
    let got = store.batch_get(&keys).await?;
    got.iter().flatten().map(WorkflowRecord::from_item).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_keys_are_pinned() {
        assert_eq!(env_key("room_1", "env_1"), Key { pk: "ROOM#room_1".into(), sk: "ENV#env_1".into() });
        assert_eq!(credential_key("h"), Key { pk: "EMBCRED#h".into(), sk: "CRED".into() });
        assert_eq!(workflow_key("room_1", "wf_1"), Key { pk: "ROOM#room_1".into(), sk: "EMBWF#wf_1".into() });
        assert_eq!(open_key("env_1", "wf_1"), Key { pk: "EMBOPEN#env_1".into(), sk: "WF#wf_1".into() });
    }

    #[test]
    fn a_write_is_conditional_on_the_revision_it_read() {
        let item = Item::new("p", "s").with_n(REV, 3);
        assert!(unchanged_since(3).holds(Some(&item), 0));
        assert!(!unchanged_since(2).holds(Some(&item), 0));
        assert!(unchanged_since(0).holds(None, 0) && !unchanged_since(0).holds(Some(&item), 0));
        let env = Item::new("p", "s").with_n(CONNECTOR_EPOCH, 2).with_s(ESTOP_ACTIVE, "false");
        assert!(at_epoch(2).holds(Some(&env), 0) && !at_epoch(1).holds(Some(&env), 0));
        assert!(not_stopped().holds(Some(&env), 0));
        assert!(not_stopped_for("Alex").holds(Some(&env), 0));
        let stopped = Item::new("p", "s").with_s(ESTOP_ACTIVE, "false").with_s(&subject_stop_attr("Alex"), "true");
        assert!(!not_stopped_for("Alex").holds(Some(&stopped), 0) && not_stopped_for("Steve").holds(Some(&stopped), 0));
    }
}
