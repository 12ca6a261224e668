//! Bound-room evidence of one turn of a run that requested `bound_room_evidence`: the
//! rechecks the contract lists (owner and current account policy; the active run-room
//! binding with the participant, role and consent identity that authorized it; room
//! status; an active, credentialed, admitted source of that room; freshness and exact
//! request-level provenance of its observations), each failing the turn with its own
//! code, and the bounded admitted observations handed to the executor. The binding,
//! membership, consent and room checks run again just before the turn is projected (one
//! BatchGetItem: the binding and room are known by then).
//! Must not depend on `http` or `mcp`.

use super::SourceService;
use super::{MAX_LISTED_SOURCES, SourceRecord, StoredObservation};
use crate::domain::source::*;
use crate::domain::turn::TurnFailure;
use crate::service::Caller;
use crate::service::records::accounts::policy_of;
use crate::service::records::bound_room::{BoundRoomRows, bound_room_rows, run_room_slot};
use crate::service::records::sources::sources_of_room;
use crate::service::rooms::room_tenant;

/// The binding that authorized a turn, as rechecked.
#[derive(Debug, Clone)]
pub struct BoundRoom {
    pub binding_ref: String,
    pub room_id: String,
    pub room_owner: String,
}

fn unavailable<E>(_: E) -> TurnFailure {
    TurnFailure::RoomEvidenceUnavailable
}

/// The rechecks of the binding and its room on the rows read together, in the order the
/// contract gives their codes.
fn check_binding(p: &Caller, run_id: &str, binding_ref: &str, rows: &BoundRoomRows) -> Result<BoundRoom, TurnFailure> {
    let binding = rows
        .binding
        .as_ref()
        .filter(|b| b.active_run_room && b.owner_hash == p.owner_hash() && b.run_id == run_id)
        .ok_or(TurnFailure::RoomBindingMissing)?;
    let policy = rows.account.as_ref().map(policy_of).ok_or(TurnFailure::RoomPolicyChanged)?;
    if policy.rooms_locked || policy.guest || policy.denied_capabilities.iter().any(|c| c == ROOM_EVIDENCE_CAPABILITY) {
        return Err(TurnFailure::RoomPolicyChanged);
    }
    let room = rows.room.as_ref().filter(|r| r.active).ok_or(TurnFailure::RoomNotActive)?;
    let member = rows.member.as_ref().ok_or(TurnFailure::RoomMembershipChanged)?;
    if member.role != binding.role {
        return Err(TurnFailure::RoomMembershipChanged);
    }
    let bound_version = binding.consent_version;
    if bound_version.is_none()
        || room.consent_version != bound_version
        || member.consent_version != bound_version
        || member.consent_receipt != binding.consent_receipt
    {
        return Err(TurnFailure::RoomConsentChanged);
    }
    Ok(BoundRoom {
        binding_ref: binding_ref.to_owned(),
        room_id: binding.room_id.clone(),
        room_owner: room.owner_account.clone(),
    })
}

/// True when the observation was stored under exactly the source's current admission.
pub(super) fn provenance_matches(o: &StoredObservation, s: &SourceRecord) -> bool {
    let p = &o.provenance;
    p.source_id == s.source_id
        && p.room_id == s.room_id
        && p.world_id == s.world_id
        && p.adapter_profile == s.adapter_profile
        && Some(&p.adapter_version) == s.adapter_version.as_ref()
        && Some(&p.adapter_hash) == s.adapter_hash.as_ref()
        && Some(&p.manifest_hash) == s.manifest_hash.as_ref()
        && Some(p.producer_epoch) == s.producer_epoch
        && o.credential_generation == s.generation
}

pub(super) fn projected(o: StoredObservation) -> RoomObservation {
    RoomObservation {
        content_sha256: observation_content_sha256(o.kind, o.event.as_deref(), &o.summary, &o.data),
        observation_ref: o.observation_ref,
        kind: o.kind,
        event: o.event,
        // Stored before the whole-text rule, a summary is redacted again on its way out.
        summary: crate::domain::room::redact_text(&o.summary),
        data: o.data,
        provenance: o.provenance,
    }
}

/// A source that may feed the runs of `bound`: active, credentialed (an unexpired
/// credential), admitted under a manifest, in the room and of the owner the binding names.
fn feeds(s: &SourceRecord, bound: &BoundRoom, now: i64) -> bool {
    s.credential_live(now)
        && s.is_admitted()
        && s.manifest_hash.is_some()
        && s.owner_account == bound.room_owner
        && s.room_id == bound.room_id
}

impl SourceService {
    /// The binding, membership, consent, room and policy rechecks of a run's turn: the
    /// run's slot, then one BatchGetItem (binding, room, membership, account).
    pub async fn recheck_room_binding(&self, p: &Caller, run_id: &str) -> Result<BoundRoom, TurnFailure> {
        let slot = run_room_slot(self.store.as_ref(), run_id).await.map_err(unavailable)?;
        let slot = slot.filter(|s| s.owner_hash == p.owner_hash()).ok_or(TurnFailure::RoomBindingMissing)?;
        let rows = bound_room_rows(
            self.store.as_ref(),
            None,
            &slot.binding_ref,
            &slot.room_id,
            &p.account_id,
            &room_tenant(p),
        )
        .await
        .map_err(unavailable)?;
        let bound = check_binding(p, run_id, &slot.binding_ref, &rows)?;
        if bound.room_id != slot.room_id {
            return Err(TurnFailure::RoomBindingMissing);
        }
        Ok(bound)
    }

    /// The recheck just before a turn is projected. The turn's binding and room are known
    /// from the recheck before it, so the run's slot is read with them in one BatchGetItem
    /// (slot + binding + room + membership + account); the slot must still name that binding.
    pub async fn recheck_bound_room(
        &self,
        p: &Caller,
        run_id: &str,
        binding_ref: &str,
        room_id: &str,
    ) -> Result<(), TurnFailure> {
        let rows =
            bound_room_rows(self.store.as_ref(), Some(run_id), binding_ref, room_id, &p.account_id, &room_tenant(p))
                .await
                .map_err(unavailable)?;
        let slot_holds = rows
            .slot
            .as_ref()
            .is_some_and(|s| s.owner_hash == p.owner_hash() && s.binding_ref == binding_ref && s.room_id == room_id);
        if !slot_holds {
            return Err(TurnFailure::RoomBindingMissing);
        }
        let bound = check_binding(p, run_id, binding_ref, &rows)?;
        if bound.room_id != room_id {
            return Err(TurnFailure::RoomBindingMissing);
        }
        Ok(())
    }

    /// Every recheck of a turn, then the admitted observations: the freshest (at most
    /// `MAX_TURN_OBSERVATIONS`) of the room's active, credentialed, admitted sources whose
    /// provenance matches their source's current admission exactly.
    pub async fn gather_room_evidence(&self, p: &Caller, run_id: &str) -> Result<RoomEvidenceInput, TurnFailure> {
        let bound = self.recheck_room_binding(p, run_id).await?;
        self.room_evidence_of(bound).await
    }

    /// The sources of a bound room that may feed its runs. The one rule for live evidence
    /// and for probes.
    pub(super) async fn admitted_sources(&self, bound: &BoundRoom) -> Result<Vec<SourceRecord>, TurnFailure> {
        let now = self.clock.epoch();
        let (sources, _) =
            sources_of_room(self.store.as_ref(), &bound.room_id, MAX_LISTED_SOURCES).await.map_err(unavailable)?;
        Ok(sources.into_iter().filter(|s| feeds(s, bound, now)).collect())
    }

    /// The admitted observations of a binding that passed its rechecks.
    pub async fn room_evidence_of(&self, bound: BoundRoom) -> Result<RoomEvidenceInput, TurnFailure> {
        let sources = self.admitted_sources(&bound).await?;
        if sources.is_empty() {
            return Err(TurnFailure::RoomSourceNotAdmitted);
        }
        let max_age = self.config.sources.evidence_max_age;
        let (mut admitted, mut mismatched) = (Vec::new(), 0usize);
        // One Query per source, issued together: a room's sources add no sequential trip.
        let reads = sources
            .iter()
            .map(|s| self.fresh_observations(&s.source_id, max_age.as_millis() as i64, 2 * MAX_TURN_OBSERVATIONS));
        let fresh_per_source = futures::future::try_join_all(reads).await.map_err(unavailable)?;
        for (s, fresh) in sources.iter().zip(fresh_per_source) {
            for o in fresh {
                if provenance_matches(&o, s) { admitted.push(o) } else { mismatched += 1 }
            }
        }
        if admitted.is_empty() {
            return Err(if mismatched > 0 {
                TurnFailure::RoomEvidenceIdentityMismatch
            } else {
                TurnFailure::RoomEvidenceStale
            });
        }
        admitted.sort_by_key(|o| o.provenance.observed_at);
        let skip = admitted.len().saturating_sub(MAX_TURN_OBSERVATIONS);
        Ok(RoomEvidenceInput {
            room_id: bound.room_id,
            binding_ref: bound.binding_ref,
            execution_enabled: false,
            max_age_ms: max_age.as_millis() as u64,
            observations: admitted.into_iter().skip(skip).map(projected).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::records::observations::OBSERVATION_BODY_VERSION;

    /// One change to a source, named in the table of a test.
    type Change = fn(&mut SourceRecord);

    fn source() -> SourceRecord {
        SourceRecord {
            source_id: "src_1".into(),
            room_id: "room_1".into(),
            owner_account: "acct_owner".into(),
            adapter_profile: "minecraft".into(),
            world_id: "w".into(),
            label: None,
            status: SourceStatus::Active,
            generation: 3,
            created_at: "t".into(),
            bearer_hash: Some("b".into()),
            delivery_hash: None,
            credential_expires_at: Some(1_000),
            credentialed_at: None,
            admitted: Some(true),
            adapter_version: Some("1.0.0".into()),
            adapter_hash: Some("a".into()),
            manifest_hash: Some("m".into()),
            producer_epoch: Some(2),
            registered_at: None,
            revoked_at: None,
        }
    }

    fn observed_by(s: &SourceRecord) -> StoredObservation {
        let at = chrono::Utc::now();
        StoredObservation {
            schema_version: OBSERVATION_BODY_VERSION,
            observation_ref: "obsv_1".into(),
            credential_generation: s.generation,
            kind: ObservationKind::Snapshot,
            event: None,
            summary: "s".into(),
            data: Default::default(),
            provenance: s.provenance_of("m", 2, "req-0001", at, at, None),
        }
    }

    #[test]
    fn an_observation_is_admitted_only_under_its_sources_current_admission() {
        let s = source();
        assert!(provenance_matches(&observed_by(&s), &s));
        let changed: [(&str, Change); 6] = [
            ("rotated", |s| s.generation += 1),
            ("epoch", |s| s.producer_epoch = Some(3)),
            ("manifest", |s| s.manifest_hash = Some("m2".into())),
            ("adapter", |s| s.adapter_hash = Some("a2".into())),
            ("world", |s| s.world_id = "w2".into()),
            ("unregistered", |s| s.adapter_version = None),
        ];
        for (what, change) in changed {
            let mut now = source();
            change(&mut now);
            assert!(!provenance_matches(&observed_by(&s), &now), "{what}");
        }
    }

    #[test]
    fn only_a_live_admitted_source_of_the_bound_room_and_owner_feeds_its_runs() {
        let bound =
            BoundRoom { binding_ref: "rrb_1".into(), room_id: "room_1".into(), room_owner: "acct_owner".into() };
        assert!(feeds(&source(), &bound, 999));
        assert!(!feeds(&source(), &bound, 1_000), "the credential expired");
        let cases: [(&str, Change); 5] = [
            ("revoked", |s| s.status = SourceStatus::Revoked),
            ("unadmitted", |s| s.admitted = Some(false)),
            ("no manifest", |s| s.manifest_hash = None),
            ("another owner", |s| s.owner_account = "acct_other".into()),
            ("another room", |s| s.room_id = "room_2".into()),
        ];
        for (what, change) in cases {
            let mut s = source();
            change(&mut s);
            assert!(!feeds(&s, &bound, 999), "{what}");
        }
    }
}
