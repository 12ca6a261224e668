//! The simulator's command ledger, keyed by (`workflow_ref`, `step_index`, `lease_token`):
//! what makes at-least-once delivery effectively once. A command already in it is never
//! executed again. With `--ledger PATH` it lives in a file (written whole, to a temporary
//! file renamed over the old one, so a crash leaves the previous or the next version),
//! together with the epoch, the acknowledgements not yet answered and the world.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::world::World;

/// Where one command stands at this connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Taken and under way (a restart finds it here: it was interrupted).
    Started,
    /// Its final acknowledgement (completed, failed, overridden) is written.
    Finished,
    /// Halted by the dead-man rule, an Emergency Stop or the cancel list.
    Halted,
    /// Found `started` after a restart: acknowledged `interrupted`, never re-executed.
    Interrupted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub workflow_ref: String,
    pub step_index: u32,
    pub lease_token: String,
    pub state: EntryState,
    /// The last acknowledgement sequence used for it.
    pub seq: u32,
    /// How many times its effect was applied to the world (never more than once).
    pub executions: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ledger {
    /// The epoch this connector last held (0: never registered).
    pub epoch: u64,
    pub dead_man_ms: u64,
    pub entries: BTreeMap<String, Entry>,
    /// Acknowledgements written but not yet answered by Helix.
    pub outbox: Vec<Value>,
    pub world: World,
    #[serde(skip)]
    path: Option<PathBuf>,
}

pub fn key(workflow_ref: &str, step_index: u32, lease_token: &str) -> String {
    format!("{workflow_ref}/{step_index}/{lease_token}")
}

impl Ledger {
    /// The ledger in `path` if it exists (a restart), else a fresh one with a new world.
    pub fn open(path: Option<&Path>, players: &str) -> anyhow::Result<Ledger> {
        if let Some(p) = path.filter(|p| p.exists()) {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let mut l: Ledger = serde_json::from_str(&text).context("the ledger file")?;
            l.path = Some(p.to_owned());
            return Ok(l);
        }
        Ok(Ledger {
            epoch: 0,
            dead_man_ms: 0,
            entries: BTreeMap::new(),
            outbox: Vec::new(),
            world: World::new(players),
            path: path.map(Path::to_owned),
        })
    }

    /// Writes the ledger (when it has a file) before anything it records is acted on.
    pub fn save(&self) -> anyhow::Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(serde_json::to_string_pretty(self)?.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// After a restart: every command still `started` was interrupted mid-way. It is
    /// acknowledged `interrupted` (queued in the outbox), never executed again.
    pub fn interrupt_started(&mut self) -> usize {
        let mut n = 0;
        for e in self.entries.values_mut().filter(|e| e.state == EntryState::Started) {
            e.state = EntryState::Interrupted;
            e.seq += 1;
            self.outbox.push(serde_json::json!({
                "workflow_ref": e.workflow_ref, "lease_token": e.lease_token, "step_index": e.step_index,
                "seq": e.seq, "status": "interrupted", "observation": null, "reason": "connector_restarted",
            }));
            n += 1;
        }
        n
    }
}
