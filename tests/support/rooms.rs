//! Shared Live Rooms over REST: creating rooms and binding runs to them. Builds on runs for
//! a bound run; knows no source.

use serde_json::{Value, json};

use crate::{TestApp, read};

/// The scopes of a room test's bearer: runs, rooms and the research library.
pub const ALL: &[&str] = &[
    "helix.agent_runs.read",
    "helix.agent_runs.write",
    "helix.rooms.read",
    "helix.rooms.manage",
    "helix.data.research_library.read",
];

impl TestApp {
    pub async fn create_room(&self, token: &str, key: &str, body: Value) -> (u16, Value) {
        read(self.post("/api/v1/rooms", token).header("Idempotency-Key", key).json(&body).send().await.unwrap()).await
    }

    /// Creates a room named `name` under a fresh key; asserts 201 and returns its id.
    pub async fn room(&self, token: &str, name: &str) -> String {
        let (status, v) = self
            .create_room(token, &format!("room-{}", helix_core::domain::random_hex(6)), json!({ "name": name }))
            .await;
        assert_eq!(status, 201, "{v}");
        v["room_id"].as_str().unwrap().to_owned()
    }

    pub async fn bind(&self, token: &str, room_id: &str, run_id: &str) -> (u16, Value) {
        read(
            self.post("/api/v1/rooms/run-bindings", token)
                .json(&json!({ "room_id": room_id, "run_id": run_id }))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Starts a run with `objective` and `scopes` and binds it to `room_id`.
    pub async fn started_and_bound(&self, token: &str, room_id: &str, objective: &str, scopes: &[&str]) -> String {
        let run = self.started(token, json!({ "objective": objective, "database_scope": scopes })).await;
        let run_id = run["run_id"].as_str().unwrap().to_owned();
        let (status, v) = self.bind(token, room_id, &run_id).await;
        assert_eq!(status, 201, "{v}");
        run_id
    }
}
