// The connector's loop (protocol v1, docs/embodiment.md): register, then poll at the
// interval Helix gives, carrying the acknowledgements; take each new command into the
// durable ledger before it touches the world; halt players on an Emergency Stop, a
// cancel, a member's stop of their player, a person taking over in game, or the dead-man
// rule.
import { HelixClient, PROTOCOL, Refused, Unreachable } from './helix.mjs';
import { Ledger, key } from './ledger.mjs';
import { CAPABILITIES, SCHEMA_HASH } from './rules.mjs';
import { execute, refusal } from './steps.mjs';

export const VERSION = '0.1.0';
/** Exit statuses: a refusal that retrying cannot fix, and another connector's epoch. */
export const EXIT_REFUSED = 2;
export const EXIT_STALE = 3;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Did the world show the step's effect (a halted mutation that happened anyway)? */
function effectSeen(step, o) {
  if (!o) return false;
  switch (step.type) {
    case 'break_block': return o.block_at_target === 'minecraft:air';
    case 'place_block': return o.block_at_target === step.item;
    case 'equip': return o.equipped === step.item;
    case 'chat': return o.chat_echo === step.text;
    default: return false;
  }
}

export class Connector {
  constructor({ config, credential, players, ledgerPath, ownerPlayer, log, fatal }) {
    this.config = config;
    this.helix = new HelixClient(config.base_url, credential);
    this.players = players;
    this.ledger = new Ledger(ledgerPath);
    this.ownerPlayer = ownerPlayer;
    this.log = log;
    this.fatal = fatal;
    this.epoch = null;
    this.interval = config.poll_interval_ms;
    this.active = new Map(); // ledger key -> run
    this.lastContact = Date.now();
    this.deadManFired = false;
    this.deadManReport = false;
    this.sendSubjects = false;
    this.ownerHold = false; // `!helix stop`: nothing runs until the owner's `!helix resume`
    this.lastReported = '';
    for (const p of players) this.watch(p);
  }

  watch(p) {
    p.on('online', () => { this.sendSubjects = true; });
    p.on('offline', () => {
      this.sendSubjects = true;
      this.haltPlayer(p, 'offline');
    });
    p.on('forced', (how) => {
      for (const run of this.active.values()) {
        if (run.player === p && !run.stopped) {
          this.log(`a forced move (${how}) of ${p.username}: ${run.cmd.workflow_ref} overridden`);
          this.stopRun(run, 'overridden');
        }
      }
    });
    p.on('chat', (who, text) => {
      if (!this.ownerPlayer || who !== this.ownerPlayer) return;
      const said = text.trim();
      if (said === '!helix pause' || said === '!helix stop') {
        // Local and at once, before Helix hears of it.
        if (said === '!helix stop') this.ownerHold = true;
        for (const q of this.players) q.halt();
        for (const run of this.active.values()) if (!run.stopped) this.stopRun(run, 'overridden');
        this.log(`the owner ${who} took the controls (${said}): every player halted`);
      } else if (said === '!helix resume' && this.ownerHold) {
        this.ownerHold = false;
        this.log(`the owner ${who} handed the controls back (${said})`);
      }
    });
  }

  subjects() {
    return this.players.filter((p) => p.nativeId).map((p) => {
      const s = { native_id: p.nativeId, display_name: p.username, online: p.online };
      const pos = p.online ? p.position() : null;
      if (pos) s.position = pos;
      return s;
    });
  }

  async register() {
    const reg = await this.helix.register({
      protocol: PROTOCOL,
      manifest: { connector_name: 'helix-minecraft-connector', connector_version: VERSION, world_id: this.config.world_id },
      schema_hash: SCHEMA_HASH,
      capabilities: CAPABILITIES,
      subjects: this.subjects(),
    });
    this.epoch = reg.epoch;
    this.ledger.epoch = reg.epoch;
    this.ledger.deadManMs = reg.dead_man_ms;
    this.ledger.outbox = []; // acknowledgements of an older epoch are refused anyway
    this.ledger.save();
    this.interval = reg.poll_interval_ms;
    this.lastContact = Date.now();
    this.log(`registered environment ${reg.environment_binding_id} at epoch ${reg.epoch}, polling every ${this.interval} ms`);
  }

  /** Halts a running command; `why` decides what is acknowledged (see `finish`). */
  stopRun(run, why) {
    if (run.stopped) return;
    run.stopped = why;
    run.player.halt();
    run.release();
  }

  haltPlayer(p, why) {
    p.halt();
    for (const run of this.active.values()) if (run.player === p) this.stopRun(run, why);
  }

  haltAll(why) {
    for (const p of this.players) p.halt();
    for (const run of this.active.values()) this.stopRun(run, why);
  }

  /** Every 100 ms: out of touch with Helix for dead_man_ms, every player stops. */
  deadManTick() {
    const limit = this.ledger.deadManMs || 10_000;
    if (this.epoch !== null && !this.deadManFired && Date.now() - this.lastContact >= limit) {
      this.deadManFired = true;
      this.deadManReport = true;
      this.haltAll('dead_man');
      this.log(`dead-man: Helix not reached for ${limit} ms, every player halted`);
    }
  }

  async run() {
    const recovering = this.ledger.epoch > 0;
    if (recovering) {
      const n = this.ledger.interruptStarted();
      this.ledger.save();
      this.epoch = this.ledger.epoch;
      this.sendSubjects = true;
      this.log(`restarted with ledger at epoch ${this.epoch}: ${n} interrupted command(s) acknowledged interrupted`);
    }
    const deadMan = setInterval(() => this.deadManTick(), 100);
    let first = true;
    try {
      for (;;) {
        if (this.epoch === null) await this.register();
        await this.pollOnce(first && recovering);
        first = false;
        await sleep(this.interval);
      }
    } finally {
      clearInterval(deadMan);
    }
  }

  async pollOnce(recovering) {
    const body = { epoch: this.epoch, acks: this.ledger.outbox.slice(0, 32), dead_man_halted: this.deadManReport };
    const subjects = this.subjects();
    const reported = JSON.stringify(subjects);
    // A player that has not joined yet has no id: the directory waits for it (a partial
    // one would drop that player and make every selection stale).
    const known = this.players.every((p) => p.nativeId);
    if (known && (this.sendSubjects || reported !== this.lastReported)) body.subjects = subjects;
    let answer;
    try {
      answer = await this.helix.poll(body);
    } catch (e) {
      if (e instanceof Unreachable) {
        this.log(`cannot reach Helix: ${e.message}`);
        return;
      }
      if (e instanceof Refused && e.code === 'connector_epoch_stale') {
        if (recovering) {
          this.log(`the ledger's epoch is no longer current (${e.details.current_epoch}): registering again`);
          this.epoch = null;
          return;
        }
        this.fatal(EXIT_STALE, 'refused: connector_epoch_stale: another connector registered for this pairing');
      }
      throw e;
    }
    this.lastContact = Date.now();
    this.deadManFired = false;
    this.deadManReport = false;
    if (body.subjects) {
      this.sendSubjects = false;
      this.lastReported = reported;
    }
    this.ledger.outbox.splice(0, body.acks.length);
    for (const r of answer.acks) this.log(`ack ${r.workflow_ref} seq ${r.seq}: ${r.outcome}`);
    this.interval = answer.next_poll_ms || this.interval;
    this.take(answer);
    this.ledger.save();
  }

  take(answer) {
    if (answer.emergency_stop_active && this.active.size > 0) {
      this.log(`Emergency Stop (generation ${answer.emergency_stop_generation}): every player halted`);
    }
    if (answer.emergency_stop_active) this.haltAll('emergency_stop');
    const stopped = new Set(answer.stopped_subjects ?? []);
    for (const p of this.players) {
      if (p.nativeId && stopped.has(p.nativeId)) {
        for (const run of this.active.values()) {
          if (run.player === p && !run.stopped) this.log(`Emergency Stop of player ${p.nativeId}: halted ${run.cmd.workflow_ref} step ${run.cmd.step_index}`);
        }
        this.haltPlayer(p, 'emergency_stop');
      }
    }
    const cancel = new Set(answer.cancel ?? []);
    for (const run of this.active.values()) {
      if (cancel.has(run.cmd.workflow_ref) && !run.stopped) {
        this.log(`cancelled by Helix: ${run.cmd.workflow_ref} step ${run.cmd.step_index}`);
        this.stopRun(run, 'cancelled');
      }
    }
    for (const cmd of answer.commands ?? []) {
      if (this.ledger.has(cmd)) continue; // a redelivery: never executed twice
      if (stopped.has(cmd.native_id) || answer.emergency_stop_active) continue;
      const player = this.players.find((p) => p.nativeId === cmd.native_id);
      const why = this.ownerHold ? 'owner_stopped' : (player ? refusal(player, cmd.step) : 'player_offline');
      this.ledger.take(cmd);
      if (why) {
        // Refused instead of accepted: nothing touched the world.
        this.ledger.ack(cmd, 'rejected', null, why);
        this.ledger.set(cmd, 'finished');
      } else {
        this.ledger.ack(cmd, 'accepted');
      }
      // Written durably first: a command reported as taken is in the ledger file, so a
      // kill -9 from here on finds it there and never executes it again.
      this.ledger.save();
      this.log(`command ${cmd.workflow_ref} step ${cmd.step_index}: ${cmd.step.type}`);
      if (why) {
        this.log(`rejected ${cmd.workflow_ref} step ${cmd.step_index}: ${why}`);
        continue;
      }
      this.start(cmd, player);
    }
  }

  start(cmd, player) {
    let release;
    const halted = new Promise((r) => { release = r; });
    const run = { cmd, player, stopped: null, halted, release };
    this.active.set(key(cmd), run);
    execute(player, cmd.step, run)
      .catch((e) => {
        this.log(`step ${cmd.workflow_ref} ${cmd.step.type}: ${e?.message ?? e}`);
        return { status: 'failed', reason: 'step_error', mutating: true };
      })
      .then((result) => this.finish(run, result))
      .catch((e) => this.fatal(1, `ledger: ${e?.message ?? e}`));
  }

  /** Acknowledges what really happened, and writes it down. */
  finish(run, result) {
    const { cmd } = run;
    this.active.delete(key(cmd));
    const o = result?.observation ?? null;
    const why = run.stopped;
    if (!why) {
      this.ledger.ack(cmd, result.status, o, result.reason ?? null);
    } else if (why === 'overridden') {
      this.ledger.ack(cmd, 'overridden');
    } else if (why === 'offline') {
      this.ledger.ack(cmd, 'interrupted', null, 'player_offline');
    } else if (effectSeen(cmd.step, o)) {
      // Halted, but the effect had already happened: say so (Helix records it).
      this.ledger.ack(cmd, 'completed', o);
    } else if (why === 'cancelled') {
      this.ledger.ack(cmd, 'failed', null, 'cancelled');
    } // an Emergency Stop or the dead-man halt: Helix already stopped or paused it
    this.ledger.set(cmd, why && why !== 'overridden' ? 'halted' : 'finished');
    this.ledger.save();
  }
}

export { Refused, Unreachable };
