//! The pairing page's pickers: the rooms the signed-in person owns (by name) and the paired
//! environments of those rooms (room name and world), so no id is typed by hand. The forms
//! keep their field names (`room_id`, `environment_binding_id`): scripts post them as
//! before, and every rule stays in the services, which check whatever is posted.

use crate::error::ApiError;
use crate::http::AppState;
use crate::service::sessions::Session;

/// A room the person may pick: one they own.
pub struct RoomChoice {
    pub room_id: String,
    pub name: String,
}

/// A paired environment the person may pick: one of a room they own.
pub struct EnvironmentChoice {
    pub environment_binding_id: String,
    pub room_id: String,
    /// `Room name · world overworld`.
    pub label: String,
}

#[derive(Default)]
pub struct Choices {
    pub rooms: Vec<RoomChoice>,
    pub environments: Vec<EnvironmentChoice>,
}

/// The person's owned rooms of the first page of their rooms, and their environments. A
/// person whose rooms are locked or who is a guest has none (the forms are then refused
/// by the services, as before).
pub async fn choices(state: &AppState, s: &Session) -> Result<Choices, ApiError> {
    let listed = match state.services.rooms.rooms_for_session(s, None).await {
        Ok(listed) => listed,
        Err(ApiError::RoomFeatureLocked | ApiError::GuestNotAllowed) => return Ok(Choices::default()),
        Err(e) => return Err(e),
    };
    let rooms: Vec<RoomChoice> = listed
        .rooms
        .into_iter()
        .filter(|r| r.room.owned_by_caller)
        .map(|r| RoomChoice { room_id: r.room.room_id, name: r.room.name })
        .collect();
    let ids: Vec<String> = rooms.iter().map(|r| r.room_id.clone()).collect();
    let environments = state
        .services
        .embodiment
        .identities_for_person(s, &ids)
        .await?
        .into_iter()
        .flat_map(|ri| {
            let (room_id, room_name) = (ri.room_id, ri.room_name);
            ri.environments.into_iter().map(move |e| EnvironmentChoice {
                label: format!("{room_name} \u{b7} world {}", e.world_id),
                environment_binding_id: e.environment_binding_id,
                room_id: room_id.clone(),
            })
        })
        .collect();
    Ok(Choices { rooms, environments })
}
