//! The one error enum of the service layer and its one mapping to the wire: one table of
//! stable `helix.agent_api.error.v1` code, HTTP status, retryability and message per
//! variant (checked against docs/wire.md's list by `wire_doc`). REST and MCP both use it.

use http::StatusCode;
use serde_json::{Value, json};

use crate::domain::run::Invalid;
use crate::store::StoreError;

mod table;
#[cfg(test)]
mod wire_doc;

pub use table::ErrorRow;
use table::error_table;

pub const ERROR_SCHEMA: &str = crate::domain::wire::ERROR_SCHEMA;

error_table! {
    /// Every refusal and failure of the service layer. Each row is the variant, then its
    /// code, HTTP status, `retry` (a retry can succeed) or `once`, and its public message.
    pub enum ApiError {
        InvalidRequest(String) => "invalid_request", BAD_REQUEST, once, "invalid request: {0}";
        /// Tool arguments off the published input schema: where (a path of the schema's own
        /// names, `arguments` for the root) and which rule, never a value of the call.
        InvalidArgument { field: String, rule: String } => "invalid_request", BAD_REQUEST, once,
            "invalid request: {field}: {rule}";
        InvalidIdempotencyKey => "invalid_idempotency_key", BAD_REQUEST, once,
            "Idempotency-Key must be 8-200 visible ASCII characters";
        HostNotAllowed => "host_not_allowed", BAD_REQUEST, once, "host not allowed";
        DuplicateHeader { name: &'static str } => "duplicate_header", BAD_REQUEST, once,
            "the {name} header must appear once";
        HttpsRequired => "https_required", BAD_REQUEST, once, "this resource is served over HTTPS only";
        RequestTimeout => "request_timeout", REQUEST_TIMEOUT, once, "the request body did not arrive in time";
        AuthenticationRequired => "authentication_required", UNAUTHORIZED, once, "bearer token required";
        InvalidToken { reason: &'static str } => "invalid_token", UNAUTHORIZED, once, "invalid bearer token";
        TenantMismatch => "tenant_mismatch", UNAUTHORIZED, once, "tenant header does not match the signed tenant";
        AccountNotLinked => "account_not_linked", FORBIDDEN, once,
            "no active account link and agent binding for this principal";
        InsufficientScope { required: Vec<String> } => "insufficient_scope", FORBIDDEN, once, "insufficient scope";
        OriginNotAllowed => "origin_not_allowed", FORBIDDEN, once, "origin not allowed";
        DataScopeNotAdmitted(String) => "data_scope_not_admitted", FORBIDDEN, once, "data scope not admitted: {0}";
        NotFound => "not_found", NOT_FOUND, once, "not found";
        MethodNotAllowed { allow: &'static str } => "method_not_allowed", METHOD_NOT_ALLOWED, once,
            "method not allowed";
        VersionConflict { current: u64 } => "version_conflict", CONFLICT, once, "expected_version is stale";
        RunBusy => "run_busy", CONFLICT, retry, "another continuation holds this run";
        RunNotContinuable { status: &'static str } => "run_not_continuable", CONFLICT, once,
            "run is {status} and cannot change";
        IdempotencyInProgress => "idempotency_in_progress", CONFLICT, retry,
            "a request with this Idempotency-Key is in progress";
        OutcomeUnknown { run_id: Option<String> } => "outcome_unknown", CONFLICT, once,
            "the outcome of the request with this Idempotency-Key is unknown; inspect the run before retrying";
        PayloadTooLarge { limit: usize } => "payload_too_large", PAYLOAD_TOO_LARGE, once, "body too large";
        UnsupportedMediaType => "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE, once, "body must be application/json";
        IdempotencyConflict => "idempotency_conflict", UNPROCESSABLE_ENTITY, once,
            "this Idempotency-Key was used with a different request";
        SessionRequired => "session_required", UNAUTHORIZED, once, "a signed-in browser session is required";
        GuestNotAllowed => "guest_not_allowed", FORBIDDEN, once,
            "this account is a guest account and cannot use this lane";
        CrossSiteRequest => "cross_site_request", FORBIDDEN, once, "cross-site request refused";
        SignInFailed { reason: &'static str } => "sign_in_failed", BAD_REQUEST, once, "sign-in failed";
        IdentityMismatch => "identity_mismatch", FORBIDDEN, once, "the verified identity is not this session's account";
        SignInUnavailable => "sign_in_unavailable", SERVICE_UNAVAILABLE, once, "browser sign-in is not configured";
        RoomFeatureLocked => "room_feature_locked", FORBIDDEN, once,
            "the account policy locks the Shared Live Room feature";
        RunAlreadyBound => "run_already_bound", CONFLICT, once,
            "this run already has an active binding of this kind; withdraw it before binding again";
        ClaimHandleInvalid => "claim_handle_invalid", NOT_FOUND, once,
            "the claim handle is not valid for this account and run";
        InviteInvalid => "invite_invalid", NOT_FOUND, once, "the invite code is not valid";
        ConsentRequired => "consent_required", FORBIDDEN, once,
            "the room's current consent version has not been accepted";
        CommandExecutionNotEnabled => "command_execution_not_enabled", FORBIDDEN, once,
            "room command execution is not enabled; nothing was executed";
        CredentialRejected(String) => "credential_rejected", BAD_REQUEST, once, "{0}";
        DeveloperRequired => "developer_required", FORBIDDEN, once,
            "only a developer account may manage room-source credentials";
        SourceCredentialInvalid => "source_credential_invalid", UNAUTHORIZED, once,
            "the source credential is not valid";
        ManifestNotAdmitted { reason: &'static str } => "manifest_not_admitted", CONFLICT, once,
            "the producer manifest was not admitted";
        ProducerEpochStale { current: u64 } => "producer_epoch_stale", CONFLICT, once,
            "the producer epoch is lower than the admitted one";
        ManifestNotRegistered => "manifest_not_registered", CONFLICT, once,
            "no admitted manifest matches this batch; register the manifest first";
        DuplicateObservation => "duplicate_observation", CONFLICT, once,
            "an observation with this request identity was already stored";
        ProbeNotFound => "probe_not_found", NOT_FOUND, once, "no probe with this id is queued for this source";
        ProbeNotPending { reason: &'static str } => "probe_not_pending", CONFLICT, once,
            "the probe is no longer pending";
        ConnectorCredentialInvalid => "connector_credential_invalid", UNAUTHORIZED, once,
            "the connector credential is not valid";
        ConnectorRegistrationRefused { reason: &'static str } => "connector_registration_refused", CONFLICT, once,
            "the connector registration was refused";
        ConnectorEpochStale { current: u64 } => "connector_epoch_stale", CONFLICT, once,
            "the connector epoch is not the current one; register again";
        ConnectorUnavailable => "connector_unavailable", CONFLICT, once,
            "no live, registered connector serves this environment";
        ActionAuthorityRequired => "action_authority_required", FORBIDDEN, once,
            "the room owner has not granted action authority to this member";
        SubjectNotSelected => "subject_not_selected", CONFLICT, once, "select your subject in this environment first";
        SubjectConflict => "subject_conflict", CONFLICT, once, "this subject is held by another member";
        SubjectStale => "subject_stale", CONFLICT, once,
            "this subject_ref is not in the current directory; list the subjects again";
        LeaseHeld => "lease_held", CONFLICT, once, "another member holds the control lease of this subject";
        EmergencyStopActive => "emergency_stop_active", CONFLICT, once,
            "an Emergency Stop is active; a person must clear it in the browser";
        ActionRefused { reason: &'static str } => "action_refused", BAD_REQUEST, once,
            "the action was refused before queuing; nothing reached the world";
        WorkflowNotResumable => "workflow_not_resumable", CONFLICT, once, "only a paused workflow can be resumed";
        RateLimited { retry_after_secs: u64 } => "rate_limited", TOO_MANY_REQUESTS, retry, "rate limit exceeded";
        ServerBusy { retry_after_secs: u64 } => "server_busy", SERVICE_UNAVAILABLE, retry,
            "the server is at its connection limit; retry later";
        Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>) => "unavailable", SERVICE_UNAVAILABLE, retry,
            "service unavailable";
        Internal(#[source] Box<dyn std::error::Error + Send + Sync>) => "internal_error", INTERNAL_SERVER_ERROR, once,
            "internal error";
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        if e.credential { ApiError::CredentialRejected(e.to_string()) } else { ApiError::InvalidRequest(e.to_string()) }
    }
}

impl From<crate::domain::page::QueryInvalid> for ApiError {
    fn from(e: crate::domain::page::QueryInvalid) -> Self {
        ApiError::InvalidRequest(e.0)
    }
}

impl From<crate::domain::room::RoomInvalid> for ApiError {
    fn from(e: crate::domain::room::RoomInvalid) -> Self {
        match e {
            crate::domain::room::RoomInvalid::Invalid(m) => ApiError::InvalidRequest(m),
            c @ crate::domain::room::RoomInvalid::CredentialShaped(_) => ApiError::CredentialRejected(c.to_string()),
        }
    }
}

impl From<crate::domain::source::SourceInvalid> for ApiError {
    fn from(e: crate::domain::source::SourceInvalid) -> Self {
        match e {
            crate::domain::source::SourceInvalid::Invalid(m) => ApiError::InvalidRequest(m),
            c @ crate::domain::source::SourceInvalid::CredentialShaped(_) => {
                ApiError::CredentialRejected(c.to_string())
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(_) => ApiError::Unavailable(Box::new(e)),
            other => ApiError::Internal(Box::new(other)),
        }
    }
}

impl ApiError {
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ApiError::Internal(Box::new(e))
    }

    pub fn code(&self) -> &'static str {
        self.row().code
    }

    pub fn status(&self) -> StatusCode {
        self.row().status
    }

    pub fn retryable(&self) -> bool {
        self.row().retryable
    }

    fn details(&self) -> Option<Value> {
        match self {
            ApiError::VersionConflict { current } => Some(json!({ "current_version": current })),
            ApiError::InvalidArgument { field, rule } => Some(json!({ "field": field, "rule": rule })),
            ApiError::InsufficientScope { required } => Some(json!({ "required_scopes": required })),
            ApiError::RunNotContinuable { status } => Some(json!({ "completion_status": status })),
            ApiError::OutcomeUnknown { run_id: Some(id) } => Some(json!({ "run_id": id })),
            ApiError::PayloadTooLarge { limit } => Some(json!({ "limit_bytes": limit })),
            ApiError::RateLimited { retry_after_secs } | ApiError::ServerBusy { retry_after_secs } => {
                Some(json!({ "retry_after_seconds": retry_after_secs }))
            }
            ApiError::InvalidToken { reason } => Some(json!({ "reason": reason })),
            ApiError::DuplicateHeader { name } => Some(json!({ "header": name })),
            ApiError::SignInFailed { reason } => Some(json!({ "reason": reason })),
            ApiError::ManifestNotAdmitted { reason } => Some(json!({ "reason": reason })),
            ApiError::ProducerEpochStale { current } => Some(json!({ "admitted_epoch": current })),
            ApiError::ProbeNotPending { reason } => Some(json!({ "reason": reason })),
            ApiError::ConnectorRegistrationRefused { reason } => Some(json!({ "reason": reason })),
            ApiError::ConnectorEpochStale { current } => Some(json!({ "current_epoch": current })),
            ApiError::ActionRefused { reason } => Some(json!({ "reason": reason })),
            _ => None,
        }
    }

    /// Seconds for the `Retry-After` header of a refusal that says when to come back.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::RateLimited { retry_after_secs } | ApiError::ServerBusy { retry_after_secs } => {
                Some(*retry_after_secs)
            }
            _ => None,
        }
    }

    /// The public message: 5xx bodies are generic, the cause chain goes to the log only.
    fn public_message(&self) -> String {
        self.to_string()
    }

    pub fn body(&self, request_id: &str) -> Value {
        crate::domain::wire::to_value(&self.envelope(request_id))
    }

    /// The `helix.agent_api.error.v1` envelope (typed: its schema is published by MCP).
    pub fn envelope(&self, request_id: &str) -> crate::domain::wire::ErrorEnvelope {
        use crate::domain::wire::{ErrorDetail, ErrorEnvelope, ErrorSchemaName};
        ErrorEnvelope {
            schema: ErrorSchemaName,
            error: ErrorDetail {
                code: self.code().to_owned(),
                message: self.public_message(),
                retryable: self.retryable(),
                details: self.details(),
            },
            request_id: request_id.to_owned(),
        }
    }

    /// Logs server-side failures with their cause chain (never the request's credentials).
    pub fn log(&self, request_id: &str) {
        if self.status().is_server_error() {
            let mut chain = String::new();
            let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(self);
            while let Some(e) = cur {
                chain.push_str(" <- ");
                chain.push_str(&e.to_string());
                cur = e.source();
            }
            tracing::error!(request_id, code = self.code(), cause = %chain, "request failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_conflict_maps_to_409_with_current_version() {
        let e = ApiError::VersionConflict { current: 4 };
        assert_eq!(e.status(), StatusCode::CONFLICT);
        let body = e.body("req_1");
        assert_eq!(body["schema"], ERROR_SCHEMA);
        assert_eq!(body["error"]["code"], "version_conflict");
        assert_eq!(body["error"]["details"]["current_version"], 4);
    }

    #[test]
    fn internal_errors_keep_their_cause_out_of_the_body() {
        let e = ApiError::internal(std::io::Error::other("disk at /secret/path failed"));
        let text = e.body("r").to_string();
        assert!(!text.contains("/secret/path"));
        assert_eq!(e.body("r")["error"]["code"], "internal_error");
        assert!(std::error::Error::source(&e).is_some());
    }
}
