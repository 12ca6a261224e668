// The connector against a real Minecraft-protocol world (flying-squid on loopback), one
// world and one `helix serve` for every case: an agent drives a player over MCP, and an
// independent observer bot confirms each effect in the world.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  agent, claimedSource, form, haltedAt, http, key, killableHelix, observer, pairedRoom, proxy, secondMember, sleep, startConnector,
  startWorld, until,
} from './lib/harness.mjs';

const GRASS_Y = 4; // superflat: grass at y=4, players stand at y=5
let world; let h; let room; let conn; let eye; let ai; let subjectRef; let net; let connArgs; let connEnv;
const POLL_MS = 500; // the pairing's poll interval

before(async () => {
  world = await startWorld();
  h = await killableHelix({ HELIX_AGENT_DATABASE_SCOPES: 'research_library,bound_room_evidence' });
  room = await pairedRoom(h);
  eye = await observer(world.port, 'Owner');
  // The connector reaches Helix through a loopback proxy the partition test cuts.
  net = await proxy(Number(new URL(h.baseUrl).port));
  room.configPath = join(room.dir, 'via-proxy.json');
  writeFileSync(room.configPath, JSON.stringify({ ...room.config, base_url: `http://127.0.0.1:${net.port}` }));
  // The same process is the room's live source (its own bearer, its own lane).
  const source = await claimedSource(h, room);
  connArgs = ['--username', 'Alex', '--owner-player', 'Owner', '--ledger', join(room.dir, 'ledger.json'),
    '--source-config', source.configPath];
  connEnv = { HELIX_SOURCE_CREDENTIAL: source.bearer };
  conn = startConnector(room, world.port, connArgs, connEnv);
  await conn.waitLine(/registered environment .* at epoch 1/, 60_000);
  ai = await agent(h, room.roomId);
  const listing = await ai.ok('helix_environment_subject_list', { room_id: room.roomId });
  const env = listing.environments.find((e) => e.environment_binding_id === room.bindingId);
  assert.equal(env.subjects.length, 1, JSON.stringify(env));
  subjectRef = env.subjects[0].subject_ref;
  await ai.ok('helix_environment_subject_select', { room_id: room.roomId, environment_binding_id: room.bindingId, subject_ref: subjectRef });
  eye.say('/give Alex dirt 8');
  await until(() => eye.where('Alex'), 10_000, 'the observer sees Alex');
});

after(async () => {
  await ai?.close().catch(() => {});
  await conn?.stop();
  net?.close();
  eye?.quit();
  await h?.stop();
  await world?.stop();
  if (room) rmSync(room.dir, { recursive: true, force: true });
});

test('full loop: move_to, break_block, place_block, equip and chat succeed, each effect seen by the observer', async () => {
  const move = await ai.queue({ type: 'move_to', x: 3, y: 5, z: 3, range: 1 });
  await ai.settle(move, ['succeeded']);
  const at = eye.where('Alex');
  assert.ok(Math.abs(at.x - 3.5) <= 1.6 && Math.abs(at.z - 3.5) <= 1.6, `the observer sees Alex near (3, 5, 3): ${at}`);

  assert.equal(eye.block(4, GRASS_Y, 4), 'grass_block');
  const brk = await ai.queue({ type: 'break_block', x: 4, y: GRASS_Y, z: 4, expected_block: 'minecraft:grass_block' });
  await ai.settle(brk, ['succeeded']);
  await until(() => eye.block(4, GRASS_Y, 4) === 'air', 2000, 'the observer sees air');

  const place = await ai.queue({ type: 'place_block', x: 4, y: GRASS_Y, z: 4, item: 'minecraft:dirt', face: 'up' });
  await ai.settle(place, ['succeeded']);
  await until(() => eye.block(4, GRASS_Y, 4) === 'dirt', 2000, 'the observer sees dirt');

  const equip = await ai.queue({ type: 'equip', item: 'minecraft:dirt', slot: 'mainhand' });
  await ai.settle(equip, ['succeeded']);

  const line = `hello from Alex ${Date.now()}`;
  const chat = await ai.queue({ type: 'chat', text: line });
  await ai.settle(chat, ['succeeded']);
  assert.ok(eye.chat.includes(`<Alex> ${line}`), `the observer read the line: ${eye.chat.slice(-5)}`);
});

let lastAlex = null;

/** Alex's block position as the observer sees it. */
function alex() {
  const p = eye.where('Alex');
  lastAlex = { x: Math.floor(p.x), y: Math.floor(p.y), z: Math.floor(p.z) };
  return lastAlex;
}

/** After a restart Alex joins again; the observer may not be sent the new entity while it
 * stands still: if it does not see Alex within 5 s it goes away and comes back beside
 * Alex's last known place, which makes the server send the players in view again. */
async function seeAlexAgain() {
  try {
    await until(() => eye.where('Alex'), 5000, 'the observer sees Alex');
    return;
  } catch { /* not yet: move away and back */ }
  const at = lastAlex ?? { x: 0, y: 5, z: 0 };
  eye.say(`/teleport Owner ${at.x + 200} 5 ${at.z + 200}`);
  await sleep(1500);
  eye.say(`/teleport Owner ${at.x + 4} 5 ${at.z + 3}`);
  await until(() => eye.where('Alex'), 15_000, 'the observer sees Alex again');
}

/** Starts a long walk and answers once the observer sees Alex moving. */
async function walking(dx = 24) {
  const from = eye.where('Alex');
  const ref = await ai.queue({ type: 'move_to', x: Math.floor(from.x) + dx, y: 5, z: Math.floor(from.z), range: 1 });
  await until(() => eye.where('Alex').distanceTo(from) > 1, 10_000, 'Alex walking');
  return ref;
}

test("live evidence: the real world's observations reach a bound run's evidence bundle", async () => {
  await conn.waitLine(/^source: manifest admitted for overworld/, 10_000);
  const p = alex();
  const bearer = h.tokens.sources;
  const run = await http(h, 'POST', '/api/v1/agent-runs',
    { objective: 'What is happening in the overworld?', database_scope: ['bound_room_evidence'] }, { bearer, idem: key('run') });
  assert.equal(run.status, 201, JSON.stringify(run.body));
  const runId = run.body.run_id;
  const bound = await http(h, 'POST', '/api/v1/rooms/run-bindings', { room_id: room.roomId, run_id: runId }, { bearer });
  assert.equal(bound.status, 201, JSON.stringify(bound.body));
  await sleep(2500); // one source tick after the binding
  const turn = await http(h, 'POST', `/api/v1/agent-runs/${runId}/continue`,
    { expected_version: run.body.version, instruction: 'Report the live room.' }, { bearer, idem: key('turn') });
  assert.ok([200, 202].includes(turn.status), JSON.stringify(turn.body));
  const evidence = await http(h, 'GET', `/api/v1/agent-runs/${runId}/evidence`, undefined, { bearer });
  assert.equal(evidence.status, 200, JSON.stringify(evidence.body));
  const text = JSON.stringify(evidence.body);
  assert.ok(text.includes('shared_live_room_evidence'), text.slice(0, 2000));
  assert.ok(text.includes(`Alex at ${p.x} ${p.y} ${p.z}`), `the real player's position: ${text.slice(0, 2000)}`);
  assert.ok(!text.includes(connEnv.HELIX_SOURCE_CREDENTIAL) && !text.includes(room.credential), 'no credential in the bundle');
});

test('refusals: a dig out of reach and an equip of an item not carried are rejected, the world unchanged', async () => {
  const p = alex();
  // Within Helix's 6 blocks of the reported position, beyond a survival player's reach.
  const target = { x: p.x + 5, y: GRASS_Y, z: p.z };
  assert.equal(eye.block(target.x, target.y, target.z), 'grass_block');
  const far = await ai.queue({ type: 'break_block', ...target, expected_block: 'minecraft:grass_block' });
  const s = await ai.settle(far, ['rejected', 'failed', 'succeeded']);
  assert.equal(s.status, 'rejected', JSON.stringify(s));
  assert.equal(s.reason, 'out_of_reach');
  assert.equal(s.late_effects_possible, false);
  await sleep(300);
  assert.equal(eye.block(target.x, target.y, target.z), 'grass_block', 'the observer sees the block untouched');

  const sword = await ai.queue({ type: 'equip', item: 'minecraft:diamond_sword', slot: 'mainhand' });
  const e = await ai.settle(sword, ['rejected', 'failed', 'succeeded']);
  assert.equal(e.status, 'rejected', JSON.stringify(e));
  assert.equal(e.reason, 'not_in_inventory');
  assert.ok(conn.lines.some((l) => l.includes(`rejected ${sword} step 0: not_in_inventory`)));
});

test('a chat line disguised as a command (a look-alike slash after white space) is refused by the connector too', async () => {
  // Helix refuses a plain "/" before queuing; the connector refuses what reaches it anyway.
  const r = await ai.act({ type: 'chat', text: '\u3000\u2215op Owner' });
  if (r.isError) {
    assert.equal(r.sc.error.code, 'action_refused', JSON.stringify(r.sc));
    return;
  }
  const s = await ai.settle(r.sc.workflow_ref, ['rejected', 'failed', 'succeeded']);
  assert.equal(s.status, 'rejected', JSON.stringify(s));
  assert.equal(s.reason, 'chat_command');
  assert.ok(!eye.chat.some((l) => l.includes('op Owner')), 'nothing reached the chat');
});

test("another member of the room cannot select or drive the owner's player", async () => {
  const member = await secondMember(h, room);
  const other = await agent(h, room.roomId, member.bearer);
  try {
    const before = eye.where('Alex').clone();
    const chatBefore = eye.chat.length;
    const sel = await other.call('helix_environment_subject_select',
      { room_id: room.roomId, environment_binding_id: room.bindingId, subject_ref: subjectRef });
    assert.ok(sel.isError, `the owner's player was selectable by another member: ${JSON.stringify(sel.sc)}`);
    for (const action of [{ type: 'move_to', x: 0, y: 5, z: 0, range: 1 }, { type: 'chat', text: 'not mine' }]) {
      const r = await other.act(action);
      assert.ok(r.isError, `another member's action was accepted: ${JSON.stringify(r.sc)}`);
    }
    await sleep(500);
    assert.ok(eye.where('Alex').distanceTo(before) < 0.5, 'Alex did not move');
    assert.ok(!eye.chat.slice(chatBefore).some((l) => l.startsWith('<Alex>')), 'Alex said nothing');
    // The owner still drives the player.
    const mine = await ai.queue({ type: 'look_at', x: 0, y: 5, z: 0 });
    await ai.settle(mine, ['succeeded']);
  } finally {
    await other.close().catch(() => {});
  }
});

async function expectHalt(stop, label) {
  const ref = await walking();
  const t0 = Date.now();
  await stop(ref);
  const last = await haltedAt(() => eye.where('Alex'));
  const ms = last - t0;
  assert.ok(ms <= POLL_MS + 100, `${label}: the observer saw Alex move ${ms} ms after the stop (goal: one poll interval + 100 ms)`);
  const s = await ai.status(ref);
  assert.equal(s.status, 'stopped', JSON.stringify(s));
  return ms;
}

test('Emergency Stop from MCP and from the room page halts a walking player within one poll interval', async () => {
  await expectHalt(async (ref) => {
    const r = await ai.control(ref, 'emergency_stop');
    assert.ok(!r.isError, JSON.stringify(r.sc));
  }, 'MCP');
  let cleared = await http(h, 'POST', '/api/account/room-connectors/emergency-stop/clear',
    { room_id: room.roomId, environment_binding_id: room.bindingId }, { cookie: h.tokens.cookie });
  assert.equal(cleared.status, 200, JSON.stringify(cleared.body));

  await expectHalt(async () => {
    assert.equal(await form(h, '/rooms/emergency-stop', { room_id: room.roomId }), 303);
  }, 'room page');
  assert.equal(await form(h, '/rooms/emergency-stop/clear', { room_id: room.roomId }), 303);
  cleared = await ai.ok('helix_environment_subject_list', { room_id: room.roomId });
  assert.equal(cleared.environments[0].emergency_stop_active, false);
});

test("the owner's in-game `!helix pause` pauses the workflow (manual_override) and resume continues it", async () => {
  const ref = await walking(-20);
  eye.say('!helix pause');
  const s = await ai.settle(ref, ['paused', 'succeeded', 'failed']);
  assert.equal(s.status, 'paused', JSON.stringify(s));
  assert.equal(s.reason, 'manual_override');
  await haltedAt(() => eye.where('Alex'));
  const r = await ai.control(ref, 'resume');
  assert.ok(!r.isError, JSON.stringify(r.sc));
  await ai.settle(ref, ['succeeded'], 30_000);
});

test('partition from Helix: the dead-man rule halts the walking player within dead_man_ms', async () => {
  // A walk longer than dead_man_ms that stays inside the chunks already loaded around Alex
  // and the observer: back and forth over 24 blocks, six legs (a goal in chunks not yet
  // sent can end `failed: no_path` on a loaded machine), the observer beside the track.
  const p = alex();
  eye.say(`/teleport Owner ${p.x + 12} 5 ${p.z + 3}`);
  await until(() => Math.abs(eye.bot.entity.position.x - (p.x + 12.5)) < 1, 5000, 'the observer beside the track');
  await until(() => eye.where('Alex'), 5000, 'the observer sees Alex');
  const leg = (dx) => ({ type: 'move_to', x: p.x + dx, y: 5, z: p.z, range: 1 });
  const from = eye.where('Alex');
  const ref = await ai.queue({ type: 'sequence', steps: [leg(24), leg(0), leg(24), leg(0), leg(24), leg(0)] });
  await until(() => eye.where('Alex').distanceTo(from) > 1, 10_000, 'Alex walking');
  const t0 = Date.now();
  net.cut();
  const line = await conn.waitLine(/^dead-man: Helix not reached for (\d+) ms/, 15_000);
  const deadMan = Number(/(\d+) ms/.exec(line)[1]);
  const last = await haltedAt(() => eye.where('Alex'));
  assert.ok(last - t0 <= deadMan + POLL_MS + 300, `halted ${last - t0} ms after the partition (dead_man_ms ${deadMan})`);
  net.heal();
  const s = await ai.settle(ref, ['paused', 'succeeded'], 10_000);
  assert.equal(s.status, 'paused', JSON.stringify(s));
  assert.equal(s.reason, 'dead_man_halted');
  const c = await ai.control(ref, 'cancel');
  assert.ok(!c.isError, JSON.stringify(c.sc));
});

/** Queues a dig of the grass block at `target` while the observer counts the items that drop,
 * and waits until the connector has taken the step. */
async function digTaken(target) {
  assert.equal(eye.block(target.x, target.y, target.z), 'grass_block');
  let n = 0;
  const count = (e) => { try { if (e.name === 'item') n += 1; } catch { /* guarded */ } };
  eye.bot.on('entitySpawn', count);
  const ref = await ai.queue({ type: 'break_block', ...target, expected_block: 'minecraft:grass_block' });
  await conn.waitLine(new RegExp(`^command ${ref} step 0: break_block`), 10_000);
  return { ref, drops: () => n, stopCounting: () => eye.bot.off('entitySpawn', count) };
}

// The server's kill comes before the connector's: Alex stays in the world through it, so the
// observer still sees Alex (a player who joins again is not always sent to an observer that
// stands still).
test('kill -9 of helix serve between dispatch and acknowledgement: the effect applies once', async () => {
  await seeAlexAgain();
  const p = alex();
  const target = { x: p.x, y: GRASS_Y, z: p.z + 1 };
  const { ref, drops, stopCounting } = await digTaken(target);
  await h.kill9(); // dispatched; the acknowledgements wait in the connector's ledger
  await until(() => eye.block(target.x, target.y, target.z) === 'air', 5000, 'the dig goes on without Helix');
  await h.restart();
  await ai.close().catch(() => {});
  ai = await agent(h, room.roomId);
  const s = await ai.settle(ref, ['succeeded', 'failed', 'outcome_unknown'], 20_000);
  assert.equal(s.status, 'succeeded', JSON.stringify(s));
  await sleep(1000);
  stopCounting();
  assert.equal(drops(), 1, 'the block was broken exactly once');
  assert.equal(conn.lines.filter((l) => l.startsWith(`command ${ref}`)).length, 1, 'taken once');
});

test('kill -9 of the connector mid-dig: outcome_unknown after the restart, the block broken at most once', async () => {
  await seeAlexAgain();
  const p = alex();
  const target = { x: p.x + 1, y: GRASS_Y, z: p.z };
  const { ref, drops, stopCounting } = await digTaken(target);
  conn.proc.kill('SIGKILL');
  await conn.exited;
  conn = startConnector(room, world.port, connArgs, connEnv);
  await conn.waitLine(/restarted with ledger at epoch \d+: 1 interrupted command/, 60_000);
  const s = await ai.settle(ref, ['outcome_unknown', 'succeeded', 'failed'], 20_000);
  assert.equal(s.status, 'outcome_unknown', JSON.stringify(s));
  await sleep(2000);
  stopCounting();
  assert.ok(drops() <= 1, `the observer counted ${drops()} drops`);
  assert.ok(!conn.lines.some((l) => l.startsWith(`command ${ref}`)), 'never executed again');
  const r = await ai.control(ref, 'resume');
  assert.ok(r.isError && r.sc.error.code === 'workflow_not_resumable', JSON.stringify(r.sc));
});

test('a wrong credential exits at once with a clear message and does not retry', async () => {
  const wrong = { ...room, credential: `hac_${'0'.repeat(64)}` };
  const c = startConnector(wrong, world.port, ['--username', 'Mallory']);
  const { code } = await c.exited;
  assert.equal(code, 2, c.lines.join('\n'));
  assert.ok(c.lines.some((l) => /register: 401 connector_credential_invalid: the credential is wrong/.test(l)), c.lines.join('\n'));
  assert.ok(!c.lines.some((l) => l.includes(wrong.credential)), 'the credential is never printed');
});
