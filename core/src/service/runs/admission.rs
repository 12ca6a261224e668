//! Logical data-scope admission of a run, at start and before every continuation: the
//! four catalog checks of `domain::scopes`, then the room-binding check of room-bound
//! scopes. Must not depend on `http` or `mcp`.

use super::RunService;
use crate::domain::run::Run;
use crate::domain::scopes::{self, DataScope, ScopeRefusal};
use crate::domain::source::PROBE_SCOPE;
use crate::error::ApiError;
use crate::service::Caller;

fn scope_error(e: ScopeRefusal) -> ApiError {
    ApiError::DataScopeNotAdmitted(match e {
        ScopeRefusal::NotEnabled(s) => format!("{s} is not enabled by this deployment"),
        ScopeRefusal::NotInCatalog(s) => format!("{s} is not a known logical scope"),
        ScopeRefusal::NotEntitled { scope, oauth_scope } => {
            format!("{scope} needs the OAuth scope {oauth_scope}")
        }
        ScopeRefusal::CapabilityUnavailable { scope, capability } => {
            format!("{scope} needs {capability}, which the account policy withholds")
        }
    })
}

impl RunService {
    /// Admits every requested scope for `run` (None at start) or names the first refused.
    pub(super) fn admit_scopes(
        &self,
        p: &Caller,
        requested: &[String],
        run: Option<&Run>,
    ) -> Result<Vec<&'static DataScope>, ApiError> {
        let admitted = scopes::admit(requested, &self.config.database_scopes, &p.scopes, |c| p.capability_available(c))
            .map_err(scope_error)?;
        for scope in admitted.iter().filter(|s| s.room_bound) {
            self.admit_room_binding(p, scope, run)?;
        }
        Ok(admitted)
    }

    /// The one place a room-bound scope is admitted. `bound_room_evidence` and
    /// `bound_room_environment_probe` are admitted at start (a run is bound to its room
    /// after it exists) and at every continuation; the binding, membership, role, consent,
    /// room and source rechecks then run for every turn, after its claim and again before
    /// projection (`service::sources::evidence`, `service::sources::probes`), each failing the turn with
    /// its own code. Any other room-bound scope is refused (fail closed) even when enabled.
    fn admit_room_binding(&self, _p: &Caller, scope: &DataScope, _run: Option<&Run>) -> Result<(), ApiError> {
        if scope.id == "bound_room_evidence" || scope.id == PROBE_SCOPE {
            return Ok(());
        }
        Err(ApiError::DataScopeNotAdmitted(format!("{} is not served by this deployment yet", scope.id)))
    }
}
