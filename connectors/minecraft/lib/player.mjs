// One player the connector drives: a Mineflayer bot on the Minecraft server, joined again
// with a growing back-off after a kick or a lost connection. Every listener is guarded
// (a listener that throws inside a Mineflayer event silently drops the bot's connection).
import { EventEmitter } from 'node:events';
import mineflayer from 'mineflayer';
import pathfinderPkg from 'mineflayer-pathfinder';

const { pathfinder, Movements } = pathfinderPkg;

const BACKOFF_MS = [1000, 2000, 4000, 8000, 15000, 30000];
const SETTLE_MS = 1000;
const SETTLE_MAX_MS = 5000;
const JOIN_MS = 30_000;
/** `<name> text`, as a server shows a player's chat line. */
const CHAT_LINE = /^<([A-Za-z0-9_]{1,16})> (.*)$/s;

/**
 * Runs every packet handler of a Mineflayer client guarded. Mineflayer's own handlers can
 * throw on a packet that comes before the state they read (a block-break animation of
 * another player while this one is still joining: its world is not loaded yet), and the
 * protocol parser rethrows that out of the socket, ending the whole process. Guarded, that
 * packet is logged and dropped; the connection and every other player go on.
 */
export function guardPackets(client, log) {
  const emit = client.emit;
  client.emit = function guardedEmit(...args) {
    try {
      return emit.apply(this, args);
    } catch (e) {
      log(`packet ${String(args[0])}: handler error: ${e?.message ?? e}`);
      return true;
    }
  };
}

export class Player extends EventEmitter {
  constructor({ host, port, username, version, auth, log, joinMs = JOIN_MS }) {
    super();
    Object.assign(this, { host, port, username, version, auth, log, joinMs });
    this.bot = null;
    this.online = false;
    this.nativeId = null;
    this.failures = 0;
    this.closed = false;
    this.timer = null;
  }

  /** Guards a listener: an exception is logged, never thrown into Mineflayer. */
  guard(fn) {
    return (...args) => {
      try {
        fn(...args);
      } catch (e) {
        this.log(`player ${this.username}: listener error: ${e?.message ?? e}`);
      }
    };
  }

  connect() {
    if (this.closed) return;
    const bot = mineflayer.createBot({
      host: this.host, port: this.port, username: this.username, auth: this.auth,
      version: this.version || false, hideErrors: true, checkTimeoutInterval: 30_000,
    });
    this.bot = bot;
    guardPackets(bot._client, (m) => this.log(`player ${this.username}: ${m}`));
    let settle = null;
    // A join that never completes (no answer, or a server that never spawns the player)
    // is given up after joinMs and tried again with the back-off: nothing waits forever.
    const joining = setTimeout(this.guard(() => {
      if (this.online || this.bot !== bot) return;
      this.log(`player ${this.username}: not joined within ${this.joinMs} ms`);
      try {
        bot.quit();
      } catch { /* not connected */ }
      bot._client?.socket?.destroy();
    }), this.joinMs);
    bot.loadPlugin(pathfinder);
    bot.once('spawn', this.guard(() => {
      const moves = new Movements(bot);
      moves.canDig = false; // walking never breaks a block: only a break_block step does
      moves.allow1by1towers = false; // nor places one
      moves.scafoldingBlocks = [];
      bot.pathfinder.setMovements(moves);
      this.nativeId = bot.player?.uuid ?? bot._client.uuid ?? this.nativeId;
      this.failures = 0;
      // The server may still correct the login position after the spawn (flying-squid
      // sends it again once the rest of the chunks are out): that is no person taking
      // over. The player is online once no such move came for SETTLE_MS (at most SETTLE_MAX_MS).
      const spawned = Date.now();
      let moved = spawned;
      settle = setInterval(this.guard(() => {
        const now = Date.now();
        if (now - moved < SETTLE_MS && now - spawned < SETTLE_MAX_MS) return;
        clearInterval(settle);
        clearTimeout(joining);
        this.online = true;
        this.log(`player ${this.username} joined ${this.host}:${this.port}`);
        this.emit('online');
      }), 100);
      bot.on('forcedMove', this.guard(() => { moved = Date.now(); }));
    }));
    bot.on('messagestr', this.guard((text) => {
      const m = CHAT_LINE.exec(text);
      if (m) this.emit('chat', m[1], m[2]);
    }));
    // A move the connector did not make: a teleport by the server, a knockback.
    bot.on('forcedMove', this.guard(() => this.online && this.emit('forced', 'teleport')));
    bot._client.on('entity_velocity', this.guard((p) => {
      if (this.online && bot.entity && p.entityId === bot.entity.id) this.emit('forced', 'knockback');
    }));
    bot.on('kicked', this.guard((reason) => this.log(`player ${this.username} kicked: ${String(reason).slice(0, 200)}`)));
    bot.on('error', this.guard((e) => this.log(`player ${this.username}: ${e?.code ?? e?.message ?? e}`)));
    bot.on('end', this.guard(() => {
      clearTimeout(joining);
      clearInterval(settle);
      const was = this.online;
      this.online = false;
      if (was) this.emit('offline');
      if (this.closed) return;
      const wait = BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)];
      this.failures += 1;
      this.log(`player ${this.username} disconnected: joining again in ${wait} ms`);
      this.timer = setTimeout(() => this.connect(), wait);
    }));
  }

  /** The block the player stands in, `[x, y, z]`, read from its entity. */
  position() {
    const p = this.bot?.entity?.position;
    return p ? [Math.floor(p.x), Math.floor(p.y), Math.floor(p.z)] : null;
  }

  /** Stops the player where it stands: pathfinding, digging, every control state, and its
   * horizontal momentum (it does not slide on for a few ticks). */
  halt() {
    const bot = this.bot;
    if (!bot) return;
    try {
      if (bot.entity?.velocity) {
        bot.entity.velocity.x = 0;
        bot.entity.velocity.z = 0;
      }
    } catch { /* not spawned */ }
    try {
      bot.pathfinder?.setGoal(null);
    } catch { /* not pathing */ }
    try {
      bot.stopDigging();
    } catch { /* not digging */ }
    try {
      bot.clearControlStates();
    } catch { /* not spawned */ }
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.halt();
    try {
      this.bot?.quit();
    } catch { /* never connected */ }
  }
}
