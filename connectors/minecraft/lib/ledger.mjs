// The command ledger, keyed by (workflow_ref, step_index, lease_token): what makes
// Helix's at-least-once delivery effectively once. It is written durably (a temporary
// file, fsync, rename, fsync of the folder) before a step touches the world, and holds
// the epoch and the acknowledgements Helix has not answered yet. A command already in it
// is never executed again; a restart acknowledges every entry it finds `started`
// `interrupted`.
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

export const key = (c) => `${c.workflow_ref}/${c.step_index}/${c.lease_token}`;

export class Ledger {
  constructor(path) {
    this.path = path ?? null;
    this.epoch = 0;
    this.deadManMs = 0;
    this.entries = {};
    this.outbox = [];
    if (this.path && existsSync(this.path)) {
      const saved = JSON.parse(readFileSync(this.path, 'utf8'));
      Object.assign(this, { epoch: saved.epoch, deadManMs: saved.dead_man_ms, entries: saved.entries, outbox: saved.outbox });
    }
  }

  has(cmd) {
    return Object.hasOwn(this.entries, key(cmd));
  }

  /** Records a command before anything happens in the world. */
  take(cmd) {
    this.entries[key(cmd)] = {
      workflow_ref: cmd.workflow_ref, step_index: cmd.step_index, lease_token: cmd.lease_token,
      native_id: cmd.native_id, type: cmd.step.type, state: 'started', seq: 0,
    };
  }

  /** Queues the next acknowledgement of a command (its sequence from the ledger). */
  ack(cmd, status, observation = null, reason = null) {
    const e = this.entries[key(cmd)];
    if (!e) return;
    e.seq += 1;
    this.outbox.push({
      workflow_ref: e.workflow_ref, lease_token: e.lease_token, step_index: e.step_index,
      seq: e.seq, status, observation, reason,
    });
  }

  set(cmd, state) {
    const e = this.entries[key(cmd)];
    if (e) e.state = state;
  }

  /** After a restart: every entry still `started` was cut off mid-way. */
  interruptStarted() {
    let n = 0;
    for (const e of Object.values(this.entries)) {
      if (e.state !== 'started') continue;
      e.state = 'interrupted';
      e.seq += 1;
      this.outbox.push({
        workflow_ref: e.workflow_ref, lease_token: e.lease_token, step_index: e.step_index,
        seq: e.seq, status: 'interrupted', observation: null, reason: 'connector_restarted',
      });
      n += 1;
    }
    return n;
  }

  /** Writes the whole ledger durably (no-op without a file). */
  save() {
    if (!this.path) return;
    const tmp = `${this.path}.tmp`;
    const body = JSON.stringify({ epoch: this.epoch, dead_man_ms: this.deadManMs, entries: this.entries, outbox: this.outbox });
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, body);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    const dir = openSync(dirname(this.path), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  }
}
