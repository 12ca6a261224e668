//! Device Check (`helix_environment_device_check`, `helix.rooms.read`): for each room the
//! caller belongs to, each source's connection health. Never a credential, an endpoint or
//! a player id. Must not depend on `http` or `mcp`.

use futures::{StreamExt, TryStreamExt};

use super::MAX_LISTED_SOURCES;
use super::SourceService;
use crate::domain::page::{self, PagedList};
use crate::domain::room::{FalseFlags, RoomId};
use crate::domain::source::*;
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::Caller;
use crate::service::records::observations::{HealthMarker, health_of_sources};
use crate::service::records::sources::{SourceRecord, active_rooms_of_member, sources_of_room};

/// Rooms whose sources Device Check reads at once.
const DEVICE_CHECK_ROOM_CONCURRENCY: usize = 8;

/// One source's health at `now` (epoch seconds and ms) under the freshness ceiling.
fn health(
    s: &SourceRecord,
    marker: Option<HealthMarker>,
    now_epoch: i64,
    now_ms: i64,
    max_age_ms: u64,
) -> SourceHealth {
    let credentialed = s.credential_live(now_epoch);
    // TTL deletion is lazy: an expired marker is no observation.
    let age = marker
        .filter(|h| h.expires_at == 0 || h.expires_at > now_epoch)
        .map(|h| (now_ms - h.last_observed_at_ms).max(0) as u64);
    SourceHealth {
        source_id: s.source_id.clone(),
        adapter_profile: s.adapter_profile.clone(),
        status: s.status,
        credentialed,
        registered: s.registered_at.is_some(),
        admitted: credentialed && s.is_admitted(),
        producer_epoch: s.producer_epoch,
        last_observation_age_ms: age,
        freshness: Freshness::of(age, max_age_ms),
    }
}

impl SourceService {
    /// One room's sources and their health markers: a Query, then a BatchGetItem.
    async fn sources_with_health(
        &self,
        room_id: String,
    ) -> Result<(String, Vec<SourceRecord>, Vec<Option<HealthMarker>>), ApiError> {
        let (sources, _) = sources_of_room(self.store.as_ref(), &room_id, MAX_LISTED_SOURCES).await?;
        let ids: Vec<&str> = sources.iter().map(|s| s.source_id.as_str()).collect();
        let healths = health_of_sources(self.store.as_ref(), &ids).await?;
        Ok((room_id, sources, healths))
    }

    /// Device Check: the caller's active rooms (a Query and a BatchGetItem), then each
    /// room's sources and health markers, several rooms at once so that the request's depth
    /// does not grow with its rooms. One page of rooms (after the `cursor` of the previous page, when given).
    pub async fn device_check(&self, p: &Caller, cursor: Option<&str>) -> Result<DeviceCheckReport, ApiError> {
        p.require(&[crate::domain::scopes::ROOMS_READ])?;
        if p.policy.rooms_locked {
            return Err(ApiError::RoomFeatureLocked);
        }
        let tenant = crate::service::rooms::room_tenant(p);
        let valid = |a: &str| RoomId::parse(a).is_some();
        let after = page::decode_opt(cursor, PagedList::DeviceCheck, &p.account_id, None, valid)?.map(|c| c.after);
        let limit = crate::service::rooms::MAX_LISTED_ROOMS;
        let (active, last) =
            active_rooms_of_member(self.store.as_ref(), &p.account_id, after.as_deref(), limit, &tenant).await?;
        let next_cursor = last.map(|last| page::encode(PagedList::DeviceCheck, &p.account_id, None, &last));
        let max_age_ms = self.config.sources.evidence_max_age.as_millis() as u64;
        let now_ms = self.clock.now().timestamp_millis();
        let now_epoch = self.clock.epoch();
        let per_room: Vec<_> = futures::stream::iter(active.into_iter().map(|id| self.sources_with_health(id)))
            .buffered(DEVICE_CHECK_ROOM_CONCURRENCY)
            .try_collect()
            .await?;
        let rooms = per_room
            .into_iter()
            .map(|(room_id, sources, healths)| RoomHealth {
                room_id,
                sources: sources
                    .iter()
                    .zip(healths)
                    .map(|(s, h)| health(s, h, now_epoch, now_ms, max_age_ms))
                    .collect(),
            })
            .collect();
        Ok(DeviceCheckReport {
            schema: DEVICE_CHECK_SCHEMA,
            rooms,
            next_cursor,
            freshness_max_age_ms: max_age_ms,
            checked_at: rfc3339(self.clock.now()),
            execution_enabled: false,
            flags: FalseFlags::default(),
        })
    }
}
