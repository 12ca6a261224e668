//! Minecraft Player Embodiment in the table: the environment binding (one action-connector
//! pairing of a room and world: its credential hash, connector epoch, manifest, subject
//! directory with native ids, member selections with their control leases, Emergency
//! Stop), the credential lookup, workflows and their open markers (each a copy of its
//! non-terminal workflow: what a poll queries), and the binding's pending-work marker.
//! Split by lane: the binding and its credential lookup (`pairing`), workflows (`player`),
//! the work marker and what a connector request reads (`connector`).
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

pub(super) const ENV_PREFIX: &str = "ENV#";
pub(super) const WORKFLOW_PREFIX: &str = "EMBWF#";
pub(super) const OPEN_PREFIX: &str = "WF#";
/// The pending-work marker's token: a clear is conditional on it (every other write
/// replaces it with a fresh one).
pub(super) const WORK_TOKEN: &str = "work_token";

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

pub(super) fn flag(v: bool) -> &'static str {
    if v { "true" } else { "false" }
}

pub(super) fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("a record serializes")
}

pub(super) fn read<T: for<'de> Deserialize<'de>>(item: &Item, what: &str) -> Result<T, ApiError> {
    let body = item.s(BODY).ok_or_else(|| ApiError::internal(std::io::Error::other(format!("{what} without body"))))?;
    serde_json::from_str(body).map_err(ApiError::internal)
}

mod connector;
mod pairing;
mod player;

pub use connector::*;
pub use pairing::*;
pub use player::*;

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
