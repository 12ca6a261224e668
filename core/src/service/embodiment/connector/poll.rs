//! The connector's one poll: the acknowledgements in, then the work out, reading as
//! little as the binding's state allows. Every request first reads its binding, room,
//! owner and work marker together (the authentication); an idle binding (its work marker
//! cleared at this epoch) is answered from that read alone; otherwise one query reads the
//! binding's open workflows (their open markers are copies), each acknowledgement and each
//! dispatch is one transaction, and a poll that finds only paused workflows and writes
//! nothing clears the marker with its answer. Must not depend on `http` or `mcp`.

use super::{AuthedConnector, check_subjects};
use crate::domain::embodiment::protocol::*;
use crate::domain::embodiment::{POLL_SCHEMA, WorkflowState};
use crate::error::ApiError;
use crate::service::embodiment::{EmbodimentService, LAST_SEEN_WRITE_SECS, POLL_INTERVAL_MS};
use crate::service::records::Tx;
use crate::service::records::embodiment::{EnvBinding, open_workflows};

/// Most open workflows one poll reads (a full page is never taken for idle).
pub(in crate::service::embodiment) const OPEN_LIMIT: usize = 16;

impl EmbodimentService {
    /// `POST /api/connectors/v1/poll`: the acknowledgements in, then the work out. A poll
    /// of an older epoch is refused whole (`connector_epoch_stale`): its acks are not applied.
    pub async fn poll_connector(&self, a: &AuthedConnector, req: PollRequest) -> Result<PollResponse, ApiError> {
        let mut binding = a.binding.clone();
        if binding.epoch == 0 || req.epoch != binding.epoch {
            return Err(ApiError::ConnectorEpochStale { current: binding.epoch });
        }
        if req.acks.len() > MAX_ACKS {
            return Err(ApiError::InvalidRequest(format!("acks: at most {MAX_ACKS}")));
        }
        if let Some(subjects) = &req.subjects {
            check_subjects(subjects)?;
        }
        // The binding's own changes (directory, last seen) first: acks are checked against it.
        let stale_seen = self.clock.epoch() - binding.last_seen >= LAST_SEEN_WRITE_SECS;
        if req.subjects.is_some() || stale_seen || req.dead_man_halted {
            binding = self.touch(binding, req.subjects.as_deref()).await?;
        }
        let answer = |binding: &EnvBinding, acks, commands, cancel| PollResponse {
            schema: POLL_SCHEMA.into(),
            epoch: binding.epoch,
            acks,
            commands,
            cancel,
            emergency_stop_generation: binding.estop_generation,
            emergency_stop_active: binding.estop_active,
            stopped_subjects: binding.subject_stops.iter().map(|s| s.native_id.clone()).collect(),
            next_poll_ms: POLL_INTERVAL_MS,
        };
        // Nothing written since a poll found no work: its answer stands (no query).
        if req.acks.is_empty()
            && !req.dead_man_halted
            && let Some(cancel) = a.work.idle_at(binding.epoch)
        {
            return Ok(answer(&binding, Vec::new(), Vec::new(), cancel.to_vec()));
        }
        let mut open = open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, OPEN_LIMIT).await?;
        let whole = open.len() < OPEN_LIMIT;
        let mut wrote = false;
        let mut acks = Vec::with_capacity(req.acks.len());
        for ack in &req.acks {
            let (outcome, applied) = self.apply_ack(&binding, ack, &open).await?;
            // The workflow as this poll wrote it (applied, or paused: authority revoked).
            if let Some(n) = applied {
                open.retain(|w| w.workflow_ref != n.workflow_ref);
                open.push(n);
                wrote = true;
            }
            acks.push(AckResult { workflow_ref: ack.workflow_ref.clone(), seq: ack.seq, outcome: outcome.into() });
        }
        if req.dead_man_halted {
            self.record_dead_man_halt(&binding).await?;
            open = open_workflows(self.store.as_ref(), &binding.room_id, &binding.binding_id, OPEN_LIMIT).await?;
            wrote = true;
        }
        // Only paused workflows left (none to hand out, no deadline to watch): the marker
        // is cleared with this answer, unless this poll wrote (the next one clears it).
        let quiet = whole && open.iter().all(|w| w.state.is_terminal() || w.state == WorkflowState::Paused);
        let (commands, cancel, wrote_work) = self.work_for(&binding, open).await?;
        if quiet && !wrote && !wrote_work && commands.is_empty() && a.work.idle_at(binding.epoch).is_none() {
            let mut tx = Tx::new();
            a.work.clear(&mut tx, &binding.binding_id, binding.epoch, cancel.clone());
            // A lost race leaves it pending: the next poll queries again.
            if let Err(f) = tx.commit(self.store.as_ref()).await
                && !f.is_cancelled()
            {
                return Err(f.into());
            }
        }
        Ok(answer(&binding, acks, commands, cancel))
    }
}
