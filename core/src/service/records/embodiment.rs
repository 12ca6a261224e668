//! Minecraft Player Embodiment in the table: the environment binding (one action-connector
//! pairing of a room and world: its credential hash, connector epoch, manifest, subject
//! directory with native ids, member selections with their control leases, Emergency
//! Stop), the credential lookup, workflows and their open markers (each a copy of its
//! non-terminal workflow: what a poll queries), and the binding's pending-work marker.
//! Bodies are JSON under `body`; the guards a write is conditional on (`rev`, the epoch,
//! the stop flag) are attributes too. Secrets are only ever hashes here. Knows no use case.

use serde::{Deserialize, Serialize};

use super::BODY;
use super::accounts::account_key;
use super::attrs::{CONNECTOR_EPOCH, ESTOP_ACTIVE, REV, STATE};
use super::rooms::{RoomTenant, member_is_owner, member_key, room_active_and_owned_by, room_key, room_pk};
use super::tx::{Role, Tx};
use crate::domain::embodiment::{Action, LateAck, RegionBox, Step, StepObservation, WorkflowState};
use crate::domain::random_hex;
use crate::error::ApiError;
use crate::store::{Cond, Item, Key, Store};

const ENV_PREFIX: &str = "ENV#";
const WORKFLOW_PREFIX: &str = "EMBWF#";
const OPEN_PREFIX: &str = "WF#";
/// The pending-work marker's token: a clear is conditional on it (every other write
/// replaces it with a fresh one).
const WORK_TOKEN: &str = "work_token";

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

/// The pending-work marker of a binding (beside its open markers, outside their prefix).
pub fn work_key(binding_id: &str) -> Key {
    Key::new(format!("EMBOPEN#{binding_id}"), "WORK")
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
    /// The player's block position as the connector last reported it (reach is counted from it).
    #[serde(default)]
    pub position: Option<[i32; 3]>,
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
    /// The owner-set box every step must stay in (none: the world's bounds only).
    #[serde(default)]
    pub region: Option<RegionBox>,
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
    /// The room is active, of the caller's tenant and owned by `account`, who is its
    /// owner member.
    pub owner_holds: bool,
    pub account: Option<Item>,
}

pub async fn binding_in_room(
    store: &dyn Store,
    room_id: &str,
    binding_id: &str,
    account: &str,
    tenant: &RoomTenant,
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
        owner_holds: tenant.admits_item(room.as_ref())
            && room_active_and_owned_by(account).holds(room.as_ref(), 0)
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
    super::limits::counter_key(&format!("subject-actions:{binding_id}:{native_id}"), minute)
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

// ---------- the pending-work marker ----------

/// Whether a binding's connector has work that only a query of its open workflows shows.
/// Every workflow write outside the connector's poll sets it pending; a poll whose query
/// found nothing to hand out clears it, conditional on its token (so a write in between
/// keeps it pending), with the answer it computed: no command, this cancel list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkMarker {
    pub pending: bool,
    /// The epoch the cleared answer was computed at (another epoch reads as pending).
    pub epoch: u64,
    /// The sticky cancel list of that answer.
    pub cancel: Vec<String>,
    /// The stored token (None: no marker yet).
    #[serde(skip)]
    pub token: Option<String>,
}

impl WorkMarker {
    fn pending_item(binding_id: &str) -> Item {
        let k = work_key(binding_id);
        let marker = WorkMarker { pending: true, ..WorkMarker::default() };
        Item::new(k.pk, k.sk).with_s(BODY, json(&marker)).with_s(WORK_TOKEN, random_hex(8))
    }

    /// The marker as read (absent or unreadable: pending).
    pub fn from_item(item: Option<&Item>) -> Self {
        let read = item.and_then(|i| Some((i.s(WORK_TOKEN)?, serde_json::from_str::<WorkMarker>(i.s(BODY)?).ok()?)));
        match read {
            Some((token, m)) => WorkMarker { token: Some(token.to_owned()), ..m },
            None => WorkMarker { pending: true, ..WorkMarker::default() },
        }
    }

    /// The cancel list of the standing answer at `epoch`, when nothing is pending.
    pub fn idle_at(&self, epoch: u64) -> Option<&[String]> {
        (!self.pending && self.token.is_some() && self.epoch == epoch).then_some(self.cancel.as_slice())
    }

    /// Clears the marker with the answer of a poll at `epoch`, conditional on the token read.
    pub fn clear(&self, tx: &mut Tx, binding_id: &str, epoch: u64, cancel: Vec<String>) {
        let k = work_key(binding_id);
        let marker = WorkMarker { pending: false, epoch, cancel, token: None };
        let item = Item::new(k.pk, k.sk).with_s(BODY, json(&marker)).with_s(WORK_TOKEN, random_hex(8));
        let cond = match &self.token {
            Some(t) => Cond::eq_s(WORK_TOKEN, t.clone()),
            None => Cond::NotExists,
        };
        tx.put(Role::WorkMarker, item, cond);
    }
}

/// What a connector request reads once: its binding, room, the owner's membership and
/// account, and the binding's work marker (one BatchGetItem).
pub struct ConnectorView {
    pub binding: Option<EnvBinding>,
    /// The room is active and owned by the pairing's owner, who is its owner member.
    pub owner_holds: bool,
    pub account: Option<Item>,
    pub work: WorkMarker,
}

pub async fn connector_view(store: &dyn Store, lookup: &CredentialLookup) -> Result<ConnectorView, ApiError> {
    let (room_id, owner) = (&lookup.room_id, &lookup.owner_account);
    let keys = [
        env_key(room_id, &lookup.binding_id),
        room_key(room_id),
        member_key(room_id, owner),
        account_key(owner),
        work_key(&lookup.binding_id),
    ];
    let mut got = store.batch_get(&keys).await?.into_iter();
    let mut next = || got.next().flatten();
    let (binding, room, member, account, work) = (next(), next(), next(), next(), next());
    Ok(ConnectorView {
        binding: binding.as_ref().map(EnvBinding::from_item).transpose()?,
        owner_holds: room_active_and_owned_by(owner).holds(room.as_ref(), 0)
            && member_is_owner().holds(member.as_ref(), 0),
        account,
        work: WorkMarker::from_item(work.as_ref()),
    })
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
        assert_eq!(work_key("env_1"), Key { pk: "EMBOPEN#env_1".into(), sk: "WORK".into() });
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

    /// A clear is conditional on the token read: a workflow write between the poll's read
    /// and its clear keeps the marker pending; a clear at one epoch is pending at another.
    #[cfg(feature = "embedded")]
    #[tokio::test]
    async fn a_write_between_read_and_clear_keeps_the_marker_pending() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::embedded::EmbeddedStore::open(&dir.path().join("t.redb")).unwrap();
        let read = |s: &crate::store::embedded::EmbeddedStore| {
            let s = s.clone();
            async move { WorkMarker::from_item(s.get(&work_key("env_1")).await.unwrap().as_ref()) }
        };
        let absent = read(&store).await;
        assert!(absent.pending && absent.idle_at(1).is_none());
        let mut tx = Tx::new();
        absent.clear(&mut tx, "env_1", 1, vec!["wf_p".into()]);
        tx.commit(&store).await.unwrap();
        let cleared = read(&store).await;
        assert_eq!(cleared.idle_at(1), Some(&["wf_p".to_owned()][..]));
        assert_eq!(cleared.idle_at(2), None, "another epoch reads as pending");

        // An action's write lands after the poll read the cleared marker.
        let mut tx = Tx::new();
        tx.put(Role::WorkMarker, WorkMarker::pending_item("env_1"), None);
        tx.commit(&store).await.unwrap();
        let mut tx = Tx::new();
        cleared.clear(&mut tx, "env_1", 1, vec![]);
        assert!(tx.commit(&store).await.unwrap_err().failed(Role::WorkMarker));
        assert!(read(&store).await.idle_at(1).is_none(), "still pending");
    }
}
