//! The room owner's region of an environment binding (the pairing page, cookie): an
//! action outside it is refused before queuing, and a queued one at dispatch (`bounds`).
//! Must not depend on `http` or `mcp`.

use crate::error::ApiError;
use crate::service::embodiment::bounds::{REGION_SCHEMA, RegionRequest, RegionSet};
use crate::service::embodiment::{EmbodimentService, RACE_RETRIES};
use crate::service::records::{Role, Tx};
use crate::service::sessions::Session;

impl EmbodimentService {
    /// `POST /api/account/room-connectors/{environment_binding_id}/region`: the room owner
    /// sets or clears the binding's region (conditional on the binding's revision and the
    /// room's owner, one transaction). Queued workflows are checked again at dispatch.
    pub async fn set_region(&self, s: &Session, binding_id: &str, req: RegionRequest) -> Result<RegionSet, ApiError> {
        let region = req.region()?;
        let owner = self.person_owner(s)?;
        for _ in 0..RACE_RETRIES {
            let binding = self.owned_binding(s, &req.room_id, binding_id).await?;
            if !binding.is_active() {
                return Err(ApiError::NotFound);
            }
            let mut next = binding.next();
            next.region = region.clone();
            let mut tx = Tx::new();
            next.write(&mut tx, binding.rev);
            owner.check(&mut tx, &next.room_id);
            match tx.commit(self.store.as_ref()).await {
                Ok(()) => {
                    return Ok(RegionSet {
                        schema: REGION_SCHEMA,
                        environment_binding_id: next.binding_id,
                        room_id: next.room_id,
                        region,
                    });
                }
                Err(f) if f.failed(Role::Room) || f.failed(Role::Member) => return Err(ApiError::NotFound),
                Err(f) if f.failed(Role::EnvBinding) || f.contended() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::RunBusy)
    }
}
