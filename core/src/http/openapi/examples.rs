//! One request example for every operation that takes a body, and the error example,
//! keyed by operation id. A unit test validates each against the operation's own
//! generated schema, so an example can never drift from the types.

use serde_json::{Value, json};

use crate::error::ApiError;

/// The request example of an operation (every operation with a body has one).
pub fn request(operation_id: &str) -> Option<Value> {
    let room = "room_5f2c0a9e4b7d4c1e8a3f";
    let run = "run_01JD6Y3Q8Z4K2M7N9P0R5S6T";
    Some(match operation_id {
        "startAgentRun" => json!({
            "objective": "Which torch recipes does the corpus document, with citations?",
            "budget": {"max_steps": 4},
        }),
        "continueAgentRun" => json!({"expected_version": 1, "instruction": "Cite the crafting table passage."}),
        "cancelAgentRun" | "cancelAccountRun" => json!({"expected_version": 3, "reason": "no longer needed"}),
        "createRoom" => json!({"name": "Build night", "description": "Saturday's survival world"}),
        "bindRunToRoom" => json!({"room_id": room, "run_id": run}),
        "claimChatBinding" => {
            json!({"claim_handle": "hcc_3b1f0e2d4c5a69788796a5b4c3d2e1f03b1f0e2d4c5a69788796a5b4c3d2e1f0", "run_id": run})
        }
        "createRoomSource" => {
            json!({"adapter_profile": "minecraft", "world_id": "overworld", "label": "Survival server"})
        }
        "registerManifest" => json!({
            "adapter_profile": "minecraft", "adapter_version": "1.0.0",
            "adapter_hash": "sha256:9f2d0c4b7a1e3f5d8c6b2a4e7f1d3c5b9a8e6f4d2c1b3a5e7f9d8c6b4a2e1f3d",
            "world_id": "overworld",
            "manifest_hash": "sha256:1a3c5e7f9b2d4f6a8c0e2b4d6f8a1c3e5b7d9f2a4c6e8b1d3f5a7c9e2b4d6f8a",
            "producer_epoch": 1,
        }),
        "ingestObservations" => json!({
            "manifest_hash": "sha256:1a3c5e7f9b2d4f6a8c0e2b4d6f8a1c3e5b7d9f2a4c6e8b1d3f5a7c9e2b4d6f8a",
            "producer_epoch": 1,
            "observations": [{"request_id": "obs-0001", "kind": "event", "event": "player_joined",
                "observed_at": "2026-12-02T07:00:00Z", "summary": "Alex joined the world", "data": {"player": "Alex"}}],
        }),
        "answerProbe" => json!({
            "manifest_hash": "sha256:1a3c5e7f9b2d4f6a8c0e2b4d6f8a1c3e5b7d9f2a4c6e8b1d3f5a7c9e2b4d6f8a",
            "producer_epoch": 1, "request_id": "probe-answer-0001", "observed_at": "2026-12-02T07:00:05Z",
            "summary": "Alex carries 23 torches",
            "inventory": {"players": [{"player": "Alex", "items": [{"item": "minecraft:torch", "count": 23}]}]},
        }),
        "claimSourceCredential" => json!({"claim_handle": "hsc_7d6c5b4a39281706f5e4d3c2b1a09f8e"}),
        "rotateSourceCredential" | "revokeSource" => json!({"room_id": room, "source_id": "src_4e2a9c1b7d3f5e8a0c6b"}),
        "selectEnvironmentSubject" => {
            json!({"environment_binding_id": "env_8c1d3f5a7b9e2c4d6f8a", "subject_ref": "sub_0f1e2d3c4b5a69788796"})
        }
        "playerAction" => json!({"action": {"type": "sequence", "steps": [
            {"type": "move_to", "x": 5, "y": 64, "z": 4},
            {"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"},
        ]}}),
        "playerWorkflowControl" => json!({"control": "cancel"}),
        "registerConnector" => json!({
            "protocol": "helix.connector.v1",
            "manifest": {"connector_name": "my-fabric-mod", "connector_version": "0.3.0", "world_id": "overworld"},
            "schema_hash": crate::domain::embodiment::action_schema_hash(),
            "capabilities": ["move_to", "look_at", "stop", "break_block", "wait"],
            "subjects": [{"native_id": "0b5e2c9a-1d3f-4e7a-8c6b-2a4e7f1d3c5b", "display_name": "Alex", "online": true}],
        }),
        "pollConnector" => json!({"epoch": 2, "acks": [{"workflow_ref": "wf_2c4e6a8b0d1f3e5a7c9b",
            "lease_token": "lt_5a7c9e1b3d5f7a9c", "step_index": 0, "seq": 1, "status": "accepted"}]}),
        "rotateActionConnector" | "revokeActionConnector" => json!({"room_id": room}),
        "setConnectorRegion" => {
            json!({"room_id": room, "min": {"x": -32, "y": 56, "z": -32}, "max": {"x": 32, "y": 96, "z": 32}})
        }
        "pairActionConnector" => json!({"room_id": room, "world_id": "overworld"}),
        "clearEmergencyStop" => json!({"room_id": room, "environment_binding_id": "env_8c1d3f5a7b9e2c4d6f8a"}),
        "createObserver" => json!({"chat_id": "chat-2026-12-02-a", "snapshot": [
            {"role": "user", "content": "How many torches does Alex have?"}]}),
        _ => return None,
    })
}

/// The error example every operation shows: a real envelope of a real error.
pub fn error() -> Value {
    serde_json::to_value(ApiError::NotFound.envelope("req_01JD6Y3Q8Z4K2M7N9P0R5S6T")).expect("an envelope is JSON")
}
