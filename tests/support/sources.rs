//! Room sources: creating one, claiming its credential in the signed-in browser, and the
//! producer's side of ingress (manifests, observation batches). Builds on the browser
//! lane for the claim; knows no run.

use helix_core::domain::source::adapter;
use serde_json::{Value, json};

use crate::{TestApp, read};

/// The scopes of a source test's bearer: runs, rooms and room sources.
pub const ALL: &[&str] = &[
    "helix.agent_runs.read",
    "helix.agent_runs.write",
    "helix.rooms.read",
    "helix.rooms.manage",
    "helix.room_sources.manage",
];

impl TestApp {
    pub async fn create_source(&self, token: &str, room_id: &str, key: &str, body: Value) -> (u16, Value) {
        read(
            self.post(&format!("/api/v1/rooms/{room_id}/sources"), token)
                .header("Idempotency-Key", key)
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Claims the delivery of a new `minecraft` source of `world`: (source_id, bearer).
    pub async fn claimed_source(&self, token: &str, cookie: &str, room_id: &str, world: &str) -> (String, String) {
        self.claimed_source_of(token, cookie, room_id, "minecraft", world).await
    }

    /// Claims the delivery of a new source of `profile` and `world`: (source_id, bearer).
    pub async fn claimed_source_of(
        &self,
        token: &str,
        cookie: &str,
        room_id: &str,
        profile: &str,
        world: &str,
    ) -> (String, String) {
        let key = format!("src-{}", helix_core::domain::random_hex(6));
        let (status, created) =
            self.create_source(token, room_id, &key, json!({ "adapter_profile": profile, "world_id": world })).await;
        assert_eq!(status, 201, "{created}");
        let handle = created["credential_delivery"]["claim_handle"].as_str().unwrap();
        let (status, cred) = read(
            self.browser(reqwest::Method::POST, "/api/account/room-sources/credential-claims", cookie)
                .json(&json!({ "claim_handle": handle }))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 201, "{cred}");
        (
            created["source"]["source_id"].as_str().unwrap().to_owned(),
            cred["source_bearer"].as_str().unwrap().to_owned(),
        )
    }

    /// A producer's POST to `/api/ingress/room-sources/{path}` under its source bearer.
    pub async fn ingress(&self, bearer: &str, path: &str, body: &Value) -> (u16, Value) {
        read(
            self.http
                .post(format!("{}/api/ingress/room-sources/{path}", self.base))
                .bearer_auth(bearer)
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }
}

/// The exact manifest of the `minecraft` adapter for `world` at `epoch`.
pub fn manifest(world: &str, epoch: u64) -> Value {
    let p = adapter("minecraft").unwrap();
    json!({
        "adapter_profile": p.id,
        "adapter_version": p.version,
        "adapter_hash": p.adapter_hash(),
        "world_id": world,
        "manifest_hash": p.manifest_hash(world),
        "producer_epoch": epoch,
    })
}

/// A batch of `player_joined` observations with `ids`, observed `age_ms` ago.
pub fn batch(world: &str, epoch: u64, ids: &[&str], age_ms: i64) -> Value {
    let at = (chrono::Utc::now() - chrono::Duration::milliseconds(age_ms)).to_rfc3339();
    let observations: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({
                "request_id": id,
                "kind": "event",
                "event": "player_joined",
                "observed_at": at,
                "summary": format!("Steve joined {world}"),
                "data": { "player_count": 3 },
            })
        })
        .collect();
    json!({
        "manifest_hash": adapter("minecraft").unwrap().manifest_hash(world),
        "producer_epoch": epoch,
        "observations": observations,
    })
}
