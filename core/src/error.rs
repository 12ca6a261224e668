//! The one error enum of the service layer and its one mapping to the wire:
//! HTTP status + stable `helix.agent_api.error.v1` code. REST and MCP both use it.

use http::StatusCode;
use serde_json::{Value, json};

use crate::domain::run::Invalid;
use crate::store::StoreError;

pub const ERROR_SCHEMA: &str = crate::domain::wire::ERROR_SCHEMA;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Tool arguments off the published input schema: where (a path of the schema's own
    /// names, `arguments` for the root) and which rule, never a value of the call.
    #[error("invalid request: {field}: {rule}")]
    InvalidArgument { field: String, rule: String },
    #[error("Idempotency-Key must be 8-200 visible ASCII characters")]
    InvalidIdempotencyKey,
    #[error("host not allowed")]
    HostNotAllowed,
    #[error("the {name} header must appear once")]
    DuplicateHeader { name: &'static str },
    #[error("this resource is served over HTTPS only")]
    HttpsRequired,
    #[error("the request body did not arrive in time")]
    RequestTimeout,
    #[error("bearer token required")]
    AuthenticationRequired,
    #[error("invalid bearer token")]
    InvalidToken { reason: &'static str },
    #[error("tenant header does not match the signed tenant")]
    TenantMismatch,
    #[error("no active account link and agent binding for this principal")]
    AccountNotLinked,
    #[error("insufficient scope")]
    InsufficientScope { required: Vec<String> },
    #[error("origin not allowed")]
    OriginNotAllowed,
    #[error("data scope not admitted: {0}")]
    DataScopeNotAdmitted(String),
    #[error("not found")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed { allow: &'static str },
    #[error("expected_version is stale")]
    VersionConflict { current: u64 },
    #[error("another continuation holds this run")]
    RunBusy,
    #[error("run is {status} and cannot change")]
    RunNotContinuable { status: &'static str },
    #[error("a request with this Idempotency-Key is in progress")]
    IdempotencyInProgress,
    /// `idempotency_in_progress` for a request whose receipt names its run (a continuation
    /// whose turn is still running): the client can poll that run meanwhile.
    #[error("a request with this Idempotency-Key is in progress on run {run_id}")]
    IdempotencyInProgressOn { run_id: String },
    #[error("the outcome of the request with this Idempotency-Key is unknown; inspect the run before retrying")]
    OutcomeUnknown { run_id: Option<String> },
    #[error("body too large")]
    PayloadTooLarge { limit: usize },
    #[error("body must be application/json")]
    UnsupportedMediaType,
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyConflict,
    #[error("a signed-in browser session is required")]
    SessionRequired,
    #[error("this account is a guest account and cannot use this lane")]
    GuestNotAllowed,
    #[error("cross-site request refused")]
    CrossSiteRequest,
    #[error("sign-in failed")]
    SignInFailed { reason: &'static str },
    #[error("the verified identity is not this session's account")]
    IdentityMismatch,
    #[error("browser sign-in is not configured")]
    SignInUnavailable,
    #[error("the account policy locks the Shared Live Room feature")]
    RoomFeatureLocked,
    #[error("this run already has an active binding of this kind; withdraw it before binding again")]
    RunAlreadyBound,
    #[error("the claim handle is not valid for this account and run")]
    ClaimHandleInvalid,
    #[error("the invite code is not valid")]
    InviteInvalid,
    #[error("the room's current consent version has not been accepted")]
    ConsentRequired,
    #[error("room command execution is not enabled; nothing was executed")]
    CommandExecutionNotEnabled,
    #[error("{0}")]
    CredentialRejected(String),
    #[error("only a developer account may manage room-source credentials")]
    DeveloperRequired,
    #[error("the source credential is not valid")]
    SourceCredentialInvalid,
    #[error("the producer manifest was not admitted")]
    ManifestNotAdmitted { reason: &'static str },
    #[error("the producer epoch is lower than the admitted one")]
    ProducerEpochStale { current: u64 },
    #[error("no admitted manifest matches this batch; register the manifest first")]
    ManifestNotRegistered,
    #[error("an observation with this request identity was already stored")]
    DuplicateObservation,
    #[error("no probe with this id is queued for this source")]
    ProbeNotFound,
    #[error("the probe is no longer pending")]
    ProbeNotPending { reason: &'static str },
    #[error("the connector credential is not valid")]
    ConnectorCredentialInvalid,
    #[error("the connector registration was refused")]
    ConnectorRegistrationRefused { reason: &'static str },
    #[error("the connector epoch is not the current one; register again")]
    ConnectorEpochStale { current: u64 },
    #[error("no live, registered connector serves this environment")]
    ConnectorUnavailable,
    #[error("the room owner has not granted action authority to this member")]
    ActionAuthorityRequired,
    #[error("select your subject in this environment first")]
    SubjectNotSelected,
    #[error("this subject is held by another member")]
    SubjectConflict,
    #[error("this subject_ref is not in the current directory; list the subjects again")]
    SubjectStale,
    #[error("another member holds the control lease of this subject")]
    LeaseHeld,
    #[error("an Emergency Stop is active; a person must clear it in the browser")]
    EmergencyStopActive,
    #[error("the action was refused before queuing; nothing reached the world")]
    ActionRefused { reason: &'static str },
    #[error("only a paused workflow can be resumed")]
    WorkflowNotResumable,
    #[error("rate limit exceeded")]
    RateLimited { retry_after_secs: u64 },
    #[error("the server is at its connection limit; retry later")]
    ServerBusy { retry_after_secs: u64 },
    #[error("service unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
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
        use ApiError::*;
        match self {
            InvalidRequest(_) | InvalidArgument { .. } => "invalid_request",
            InvalidIdempotencyKey => "invalid_idempotency_key",
            HostNotAllowed => "host_not_allowed",
            DuplicateHeader { .. } => "duplicate_header",
            HttpsRequired => "https_required",
            RequestTimeout => "request_timeout",
            AuthenticationRequired => "authentication_required",
            InvalidToken { .. } => "invalid_token",
            TenantMismatch => "tenant_mismatch",
            AccountNotLinked => "account_not_linked",
            InsufficientScope { .. } => "insufficient_scope",
            OriginNotAllowed => "origin_not_allowed",
            DataScopeNotAdmitted(_) => "data_scope_not_admitted",
            NotFound => "not_found",
            MethodNotAllowed { .. } => "method_not_allowed",
            VersionConflict { .. } => "version_conflict",
            RunBusy => "run_busy",
            RunNotContinuable { .. } => "run_not_continuable",
            IdempotencyInProgress | IdempotencyInProgressOn { .. } => "idempotency_in_progress",
            OutcomeUnknown { .. } => "outcome_unknown",
            PayloadTooLarge { .. } => "payload_too_large",
            UnsupportedMediaType => "unsupported_media_type",
            IdempotencyConflict => "idempotency_conflict",
            RateLimited { .. } => "rate_limited",
            ServerBusy { .. } => "server_busy",
            RoomFeatureLocked => "room_feature_locked",
            RunAlreadyBound => "run_already_bound",
            ClaimHandleInvalid => "claim_handle_invalid",
            CommandExecutionNotEnabled => "command_execution_not_enabled",
            ConnectorCredentialInvalid => "connector_credential_invalid",
            ConnectorRegistrationRefused { .. } => "connector_registration_refused",
            ConnectorEpochStale { .. } => "connector_epoch_stale",
            ConnectorUnavailable => "connector_unavailable",
            ActionAuthorityRequired => "action_authority_required",
            SubjectNotSelected => "subject_not_selected",
            SubjectConflict => "subject_conflict",
            SubjectStale => "subject_stale",
            LeaseHeld => "lease_held",
            EmergencyStopActive => "emergency_stop_active",
            ActionRefused { .. } => "action_refused",
            WorkflowNotResumable => "workflow_not_resumable",
            ConsentRequired => "consent_required",
            InviteInvalid => "invite_invalid",
            CredentialRejected(_) => "credential_rejected",
            DeveloperRequired => "developer_required",
            SourceCredentialInvalid => "source_credential_invalid",
            ManifestNotAdmitted { .. } => "manifest_not_admitted",
            ProducerEpochStale { .. } => "producer_epoch_stale",
            ManifestNotRegistered => "manifest_not_registered",
            DuplicateObservation => "duplicate_observation",
            ProbeNotFound => "probe_not_found",
            ProbeNotPending { .. } => "probe_not_pending",
            SessionRequired => "session_required",
            GuestNotAllowed => "guest_not_allowed",
            CrossSiteRequest => "cross_site_request",
            SignInFailed { .. } => "sign_in_failed",
            IdentityMismatch => "identity_mismatch",
            SignInUnavailable => "sign_in_unavailable",
            Unavailable(_) => "unavailable",
            Internal(_) => "internal_error",
        }
    }

    pub fn status(&self) -> StatusCode {
        use ApiError::*;
        match self {
            InvalidRequest(_)
            | InvalidArgument { .. }
            | InvalidIdempotencyKey
            | HostNotAllowed
            | DuplicateHeader { .. }
            | HttpsRequired => StatusCode::BAD_REQUEST,
            RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            AuthenticationRequired | InvalidToken { .. } | TenantMismatch => StatusCode::UNAUTHORIZED,
            AccountNotLinked | InsufficientScope { .. } | OriginNotAllowed | DataScopeNotAdmitted(_) => {
                StatusCode::FORBIDDEN
            }
            NotFound => StatusCode::NOT_FOUND,
            MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            VersionConflict { .. }
            | RunBusy
            | RunNotContinuable { .. }
            | IdempotencyInProgress
            | IdempotencyInProgressOn { .. }
            | OutcomeUnknown { .. } => StatusCode::CONFLICT,
            PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            IdempotencyConflict => StatusCode::UNPROCESSABLE_ENTITY,
            RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            RoomFeatureLocked | CommandExecutionNotEnabled | ConsentRequired => StatusCode::FORBIDDEN,
            RunAlreadyBound => StatusCode::CONFLICT,
            ClaimHandleInvalid | InviteInvalid => StatusCode::NOT_FOUND,
            CredentialRejected(_) => StatusCode::BAD_REQUEST,
            DeveloperRequired => StatusCode::FORBIDDEN,
            SourceCredentialInvalid => StatusCode::UNAUTHORIZED,
            ManifestNotAdmitted { .. }
            | ProducerEpochStale { .. }
            | ManifestNotRegistered
            | DuplicateObservation
            | ProbeNotPending { .. } => StatusCode::CONFLICT,
            ProbeNotFound => StatusCode::NOT_FOUND,
            ConnectorCredentialInvalid => StatusCode::UNAUTHORIZED,
            ActionAuthorityRequired => StatusCode::FORBIDDEN,
            ActionRefused { .. } => StatusCode::BAD_REQUEST,
            ConnectorRegistrationRefused { .. }
            | ConnectorEpochStale { .. }
            | ConnectorUnavailable
            | SubjectNotSelected
            | SubjectConflict
            | SubjectStale
            | LeaseHeld
            | EmergencyStopActive
            | WorkflowNotResumable => StatusCode::CONFLICT,
            SessionRequired => StatusCode::UNAUTHORIZED,
            GuestNotAllowed | CrossSiteRequest | IdentityMismatch => StatusCode::FORBIDDEN,
            SignInFailed { .. } => StatusCode::BAD_REQUEST,
            SignInUnavailable | ServerBusy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn retryable(&self) -> bool {
        matches!(
            self,
            ApiError::RunBusy
                | ApiError::IdempotencyInProgress
                | ApiError::IdempotencyInProgressOn { .. }
                | ApiError::RateLimited { .. }
                | ApiError::ServerBusy { .. }
                | ApiError::Unavailable(_)
        )
    }

    fn details(&self) -> Option<Value> {
        match self {
            ApiError::VersionConflict { current } => Some(json!({ "current_version": current })),
            ApiError::InvalidArgument { field, rule } => Some(json!({ "field": field, "rule": rule })),
            ApiError::InsufficientScope { required } => Some(json!({ "required_scopes": required })),
            ApiError::RunNotContinuable { status } => Some(json!({ "completion_status": status })),
            ApiError::OutcomeUnknown { run_id: Some(id) } | ApiError::IdempotencyInProgressOn { run_id: id } => {
                Some(json!({ "run_id": id }))
            }
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
