// The ledger rule and the bound on every step, without a world: a command the connector
// reports taking is already in the ledger file (a kill -9 then cannot lose it), and a wait
// on the world that never ends is cut off.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Connector } from '../lib/connector.mjs';
import { key } from '../lib/ledger.mjs';
import { guardPackets, Player } from '../lib/player.mjs';
import { execute } from '../lib/steps.mjs';

/** A joined player as the connector sees it (no server: a `wait` step needs none). */
function standIn(nativeId) {
  const p = new EventEmitter();
  Object.assign(p, {
    username: 'Alex', nativeId, online: true, bot: { entity: {} }, position: () => [0, 5, 0], halt: () => {}, log: () => {},
  });
  return p;
}

test('a command is written durably before the connector reports taking it (a kill then finds it in the ledger)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'helix-mc-ledger-'));
  try {
    const ledgerPath = join(dir, 'ledger.json');
    const onDisk = [];
    const log = (line) => {
      const m = /^command (\S+) step (\d+)/.exec(line);
      if (!m) return;
      // What a kill -9 at this line would leave behind.
      const saved = existsSync(ledgerPath) ? JSON.parse(readFileSync(ledgerPath, 'utf8')) : { entries: {}, outbox: [] };
      onDisk.push({ ref: m[1], saved });
    };
    const c = new Connector({
      config: { base_url: 'http://127.0.0.1:9', world_id: 'overworld', poll_interval_ms: 500 },
      credential: `hac_${'1'.repeat(64)}`, players: [standIn('uuid-alex'), standIn('uuid-steve')], ledgerPath, log,
      fatal: (s, m) => { throw new Error(m); },
    });
    const cmd = (ref, nativeId) => ({
      workflow_ref: ref, step_index: 0, lease_token: `lease-${ref}`, native_id: nativeId, step: { type: 'wait', ticks: 1 },
    });
    const accepted = cmd('wf_accepted', 'uuid-alex');
    const offline = cmd('wf_offline', 'uuid-nobody');
    c.take({ commands: [accepted, offline] });
    assert.deepEqual(onDisk.map((d) => d.ref), ['wf_accepted', 'wf_offline']);
    for (const [d, c0, status] of [[onDisk[0], accepted, 'accepted'], [onDisk[1], offline, 'rejected']]) {
      assert.ok(d.saved.entries[key(c0)], `${d.ref} is in the ledger file when it is reported`);
      assert.ok(d.saved.outbox.some((a) => a.workflow_ref === d.ref && a.status === status), JSON.stringify(d.saved.outbox));
    }
    // Delivered again (Helix is at-least-once): never taken twice.
    c.take({ commands: [accepted] });
    assert.equal(onDisk.length, 2);
    await new Promise((r) => setTimeout(r, 200)); // the wait step finishes
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a step whose wait on the world never ends is bounded: the player is halted and the step answered', async () => {
  let halted = 0;
  const player = standIn('uuid-alex');
  player.halt = () => { halted += 1; };
  player.bot = { entity: {}, pathfinder: { goto: () => new Promise(() => {}) } }; // a path that never ends
  const run = { halted: new Promise(() => {}), stopped: null, limitMs: 200 };
  const t0 = Date.now();
  const result = await Promise.race([
    execute(player, { type: 'move_to', x: 5, y: 5, z: 5, range: 1 }, run),
    new Promise((r) => setTimeout(() => r('still waiting'), 3000)),
  ]);
  assert.notEqual(result, 'still waiting', 'the step never ended');
  assert.equal(result.status, 'failed', JSON.stringify(result));
  assert.ok(halted >= 1, 'the player was halted');
  assert.ok(Date.now() - t0 < 2000);
});

test('a join the server never answers is given up and tried again (no wait on the world is unbounded)', async () => {
  const { createServer } = await import('node:net');
  const sockets = [];
  const silent = createServer((s) => { sockets.push(s); s.on('error', () => {}); }); // accepts, never answers
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  const lines = [];
  const p = new Player({
    host: '127.0.0.1', port: silent.address().port, username: 'Alex', version: '1.19.4', auth: 'offline', log: (l) => lines.push(l), joinMs: 300,
  });
  try {
    p.connect();
    const end = Date.now() + 5000;
    while (!lines.some((l) => /joining again in \d+ ms/.test(l)) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.ok(lines.some((l) => l.includes('not joined within 300 ms')), lines.join('\n'));
    assert.ok(lines.some((l) => /disconnected: joining again in 1000 ms/.test(l)), lines.join('\n'));
  } finally {
    p.close();
    for (const s of sockets) s.destroy();
    silent.close();
  }
});

test('a Mineflayer packet handler that throws is logged and dropped, not thrown out of the socket', () => {
  // As mineflayer's block_actions plugin does on a block-break animation that comes while
  // the player is still joining (its world is not loaded yet): unguarded, the protocol
  // parser rethrows it and the whole connector process ends.
  const client = new EventEmitter();
  const after = [];
  client.on('block_break_animation', () => { throw new TypeError("Cannot read properties of undefined (reading 'getBlock')"); });
  client.on('keep_alive', (p) => after.push(p.keepAliveId));
  const lines = [];
  guardPackets(client, (l) => lines.push(l));
  assert.doesNotThrow(() => client.emit('block_break_animation', { entityId: 7, location: { x: 0, y: 4, z: 0 } }));
  assert.match(lines[0], /^packet block_break_animation: handler error: Cannot read properties of undefined/);
  client.emit('keep_alive', { keepAliveId: 1n });
  assert.deepEqual(after, [1n], 'the next packet is handled as before');
});
