//! A mutation's answer, typed by the view it answers with. [`Mutation<V>`] carries the exact
//! JSON of the answer (fresh, or replayed byte for byte from its receipt: the stored form
//! is the serialized view, unchanged) and takes from `V` what the transports need besides
//! the bytes: REST reads the `Location` of a created resource from [`MutationView`], and
//! an MCP tool's published output schema is `V`'s ([`crate::mcp::tools::Reply`]), so a
//! tool cannot declare one view and answer another. Must not depend on `http` or `mcp`.

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;

use crate::domain::embodiment::WorkflowView;
use crate::domain::room::RoomView;
use crate::domain::source::SourceCreated;
use crate::domain::wire::RunView;

/// A view a mutation answers with.
pub trait MutationView: schemars::JsonSchema {
    /// Where the view's resource lives as serde reads it from an answer: a projection of
    /// the view's own id field ([`IgnoredAny`] for a view with no addressable resource).
    /// Fresh answers and replays are read the same way, from the same bytes, so a replay
    /// says the same `Location` as the first answer did.
    type Identity: DeserializeOwned;

    /// The REST `Location` of the resource a `201` of this view created.
    fn location(id: &Self::Identity) -> Option<String>;
}

/// The result of a mutation: the response to send (fresh or replayed from its receipt).
/// Only the idempotent commit builds one ([`crate::service::records::commit_once`],
/// [`crate::service::records::answer_from_receipt`]), naming the view it answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation<V> {
    pub status: u16,
    /// The answer as first serialized (a replay: the receipt's stored bytes, parsed).
    pub body: Value,
    pub replayed: bool,
    view: PhantomData<fn() -> V>,
}

impl<V: MutationView> Mutation<V> {
    /// An answer of status `status` whose JSON is `body`: a view `V` (a success), or the
    /// error envelope a receipt stored for a refusal.
    pub(crate) fn answered(status: u16, body: Value, replayed: bool) -> Self {
        Mutation { status, body, replayed, view: PhantomData }
    }

    /// Where the resource a `201` created lives; `None` for any other answer.
    pub fn location(&self) -> Option<String> {
        if self.status != 201 {
            return None;
        }
        V::Identity::deserialize(&self.body).ok().and_then(|id| V::location(&id))
    }
}

/// The id field of a run view.
#[derive(Deserialize)]
pub struct RunRef {
    run_id: String,
}

impl MutationView for RunView {
    type Identity = RunRef;
    fn location(id: &RunRef) -> Option<String> {
        Some(format!("/api/v1/agent-runs/{}", id.run_id))
    }
}

/// The id field of a room view.
#[derive(Deserialize)]
pub struct RoomRef {
    room_id: String,
}

/// A room is answered redacted ([`crate::domain::room::Redacted`]); the view is its shape.
impl MutationView for RoomView {
    type Identity = RoomRef;
    fn location(id: &RoomRef) -> Option<String> {
        Some(format!("/api/v1/rooms/{}", id.room_id))
    }
}

/// A source is addressed inside its room; its create answers with no `Location`.
impl MutationView for SourceCreated {
    type Identity = IgnoredAny;
    fn location(_: &IgnoredAny) -> Option<String> {
        None
    }
}

/// An accepted action (`202`) is polled through its workflow status tool, not a URL.
impl MutationView for WorkflowView {
    type Identity = IgnoredAny;
    fn location(_: &IgnoredAny) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_created_run_or_room_says_where_it_lives_fresh_or_replayed() {
        for replayed in [false, true] {
            let run = Mutation::<RunView>::answered(201, json!({"run_id": "run_1", "version": 1}), replayed);
            assert_eq!(run.location().as_deref(), Some("/api/v1/agent-runs/run_1"));
            let room = Mutation::<RoomView>::answered(201, json!({"room_id": "room_1"}), replayed);
            assert_eq!(room.location().as_deref(), Some("/api/v1/rooms/room_1"));
        }
    }

    #[test]
    fn only_a_201_of_an_addressable_view_has_a_location() {
        assert_eq!(Mutation::<RunView>::answered(200, json!({"run_id": "run_1"}), false).location(), None);
        assert_eq!(Mutation::<RunView>::answered(409, json!({"error": {"code": "x"}}), true).location(), None);
        assert_eq!(Mutation::<SourceCreated>::answered(201, json!({"source": {}}), false).location(), None);
    }
}
