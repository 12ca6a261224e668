//! The OpenAPI links between operations: which identifier of an answer names the
//! resource of a follow-up call. Clients and stateful testers (Schemathesis's stateful
//! phase) follow them: a started run to its inspect, continue, cancel, events and
//! evidence; a created room to its routes; a binding to its withdrawal; a queued player
//! action to its workflow.

use serde_json::{Map, Value, json};

/// `(from operation, to operations, [(path parameter, field of the answer's body)])`.
type Link = (&'static str, &'static [&'static str], &'static [(&'static str, &'static str)]);

const LINKS: &[Link] = &[
    (
        "startAgentRun",
        &["inspectAgentRun", "continueAgentRun", "cancelAgentRun", "listAgentRunEvents", "fetchAgentRunEvidence"],
        &[("run_id", "run_id")],
    ),
    (
        "createRoom",
        &[
            "inspectRoom",
            "listRoomSources",
            "createRoomSource",
            "roomCommand",
            "listEnvironmentSubjects",
            "selectEnvironmentSubject",
            "playerAction",
        ],
        &[("room_id", "room_id")],
    ),
    ("bindRunToRoom", &["unbindRun"], &[("binding_ref", "binding_ref")]),
    ("claimChatBinding", &["unbindChat"], &[("binding_ref", "binding_ref")]),
    (
        "playerAction",
        &["playerWorkflowStatus", "playerWorkflowControl"],
        &[("room_id", "room_id"), ("workflow_ref", "workflow_ref")],
    ),
];

/// The `links` of an operation's success answers (None when it links nowhere).
pub fn of(operation_id: &str) -> Option<Value> {
    let (_, targets, params) = LINKS.iter().find(|(from, _, _)| *from == operation_id)?;
    let params: Map<String, Value> =
        params.iter().map(|(p, field)| (p.to_string(), Value::from(format!("$response.body#/{field}")))).collect();
    let links: Map<String, Value> =
        targets.iter().map(|to| (to.to_string(), json!({"operationId": to, "parameters": params}))).collect();
    Some(Value::Object(links))
}

/// Every link names operations of the table and parameters of the target's path.
#[cfg(test)]
pub fn all() -> &'static [Link] {
    LINKS
}
