// Player embodiment in a real Minecraft-protocol world (not a test): the Minecraft
// connector against the test world (flying-squid on loopback), an agent over the official
// MCP TypeScript SDK and an observer bot that reads the world itself. It prints one JSON
// document: action accepted -> effect seen (p50/p99), Emergency Stop -> player halted
// (p50/p99), and the safety scorecard (postconditions verified, outcome_unknown, double
// executions under kill -9, false accepts on an adversarial set, benign actions accepted).
//
//   (cd connectors/minecraft && npm ci)
//   HELIX_BIN=target/release/helix node conformance/bench/minecraft.mjs
//
// Env: BENCH_LATENCY_SAMPLES (28), BENCH_STOP_SAMPLES (10), BENCH_SEQUENCES (25, of 8 steps),
//      BENCH_KILLS (5: connector kills mid-dig; and 3 kills of helix serve).
import { join } from 'node:path';
import {
  MC_VERSION, agent, haltedAt, http, killableHelix, observer, pairedRoom, secondMember, sleep, startConnector, startWorld, until,
} from '../../connectors/minecraft/test/lib/harness.mjs';

const N_LAT = Number(process.env.BENCH_LATENCY_SAMPLES ?? 28);
const N_STOP = Number(process.env.BENCH_STOP_SAMPLES ?? 10);
const N_SEQ = Number(process.env.BENCH_SEQUENCES ?? 25);
const N_KILL = Number(process.env.BENCH_KILLS ?? 5);
const GRASS_Y = 4;
const HOME = { x: 10, y: 5, z: 14 };
const DENIED = ['tnt', 'tnt_minecart', 'command_block', 'chain_command_block', 'repeating_command_block',
  'command_block_minecart', 'structure_block', 'jigsaw', 'barrier', 'bedrock', 'end_portal_frame', 'lava_bucket',
  'fire_charge', 'flint_and_steel', 'end_crystal', 'respawn_anchor'].map((n) => `minecraft:${n}`);

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : null;
};
const log = (m) => process.stderr.write(`${m}\n`);

const world = await startWorld();
// No HTTP rate limits on loopback (as conformance/bench/run); the per-subject action limit stays.
const h = await killableHelix({ HELIX_MCP_IP_RATE_LIMIT: '0', HELIX_MCP_PRINCIPAL_RATE_LIMIT: '0', HELIX_AGENT_IP_RATE_LIMIT: '0', HELIX_AGENT_PRINCIPAL_RATE_LIMIT: '0' });
const room = await pairedRoom(h);
const eye = await observer(world.port, 'Owner');
const connArgs = ['--username', 'Alex', '--owner-player', 'Owner', '--ledger', join(room.dir, 'ledger.json')];
let conn = startConnector(room, world.port, connArgs);
let ai;
const out = { world: `flying-squid 1.12.0, Minecraft ${MC_VERSION}`, helix_bin: process.env.HELIX_BIN ?? 'target/debug/helix' };
try {
  await conn.waitLine(/registered environment/, 60_000);
  ai = await agent(h, room.roomId);
  const listing = await ai.ok('helix_environment_subject_list', { room_id: room.roomId });
  const subjectRef = listing.environments[0].subjects[0].subject_ref;
  await ai.ok('helix_environment_subject_select',
    { room_id: room.roomId, environment_binding_id: room.bindingId, subject_ref: subjectRef });
  eye.say('/give Alex dirt 64');

  /** An action; waits out `rate_limited` (30 accepted actions a subject and minute). */
  const act = async (action) => {
    for (;;) {
      let r;
      try {
        r = await ai.act(action);
      } catch (e) {
        return { refusedAt: 'preflight', error: String(e.message).slice(0, 80) };
      }
      if (r.isError && r.sc.error.code === 'rate_limited') {
        await sleep(1000 * (r.sc.error.details?.retry_after_seconds ?? 5));
        continue;
      }
      if (r.isError) return { refusedAt: 'helix', error: r.sc.error.code, reason: r.sc.error.details?.reason };
      return { ref: r.sc.workflow_ref, at: Date.now() };
    }
  };
  const done = (ref, ms = 30_000) => ai.settle(ref, ['succeeded', 'failed', 'rejected', 'outcome_unknown', 'stopped', 'paused', 'cancelled', 'timed_out'], ms);
  const home = async () => {
    const r = await act({ type: 'move_to', ...HOME, range: 0 });
    await done(r.ref);
  };
  await home();
  const T = { x: HOME.x + 1, y: GRASS_Y, z: HOME.z };
  const seen = (name) => eye.block(T.x, T.y, T.z) === name;

  // 1. accepted -> effect seen by the observer (break and place alternating at T).
  const latency = [];
  for (let i = 0; i < N_LAT; i += 1) {
    const before = eye.block(T.x, T.y, T.z);
    const action = before === 'air'
      ? { type: 'place_block', ...T, item: 'minecraft:dirt', face: 'up' }
      : { type: 'break_block', ...T, expected_block: `minecraft:${before}` };
    const r = await act(action);
    const want = before === 'air' ? 'dirt' : 'air';
    await until(() => seen(want), 10_000, `observer sees ${want}`, 5);
    latency.push(Date.now() - r.at);
    await done(r.ref);
  }
  out.accepted_to_effect_ms = { samples: latency.length, p50: pct(latency, 50), p99: pct(latency, 99), max: Math.max(...latency) };
  log(`latency ${JSON.stringify(out.accepted_to_effect_ms)}`);

  // 2. Emergency Stop (MCP) -> the observer sees the walking player halt.
  const halts = [];
  for (let i = 0; i < N_STOP; i += 1) {
    const from = eye.where('Alex');
    const r = await act({ type: 'move_to', x: HOME.x + (i % 2 ? -18 : 18), y: 5, z: HOME.z, range: 1 });
    await until(() => eye.where('Alex').distanceTo(from) > 1, 10_000, 'walking');
    const t0 = Date.now();
    await ai.control(r.ref, 'emergency_stop');
    halts.push((await haltedAt(() => eye.where('Alex'), 600)) - t0);
    await http(h, 'POST', '/api/account/room-connectors/emergency-stop/clear',
      { room_id: room.roomId, environment_binding_id: room.bindingId }, { cookie: h.tokens.cookie });
  }
  out.emergency_stop_to_halt_ms = { samples: halts.length, p50: pct(halts, 50), p99: pct(halts, 99), max: Math.max(...halts), poll_interval_ms: room.config.poll_interval_ms };
  log(`stop ${JSON.stringify(out.emergency_stop_to_halt_ms)}`);
  await home();

  // 3. Benign actions: sequences of 8 steps (break, place alternating), each verified.
  let steps = 0; let verified = 0; let unknown = 0; let benignRefused = 0;
  for (let i = 0; i < N_SEQ; i += 1) {
    const first = eye.block(T.x, T.y, T.z);
    const seq = [];
    let cur = first;
    for (let k = 0; k < 8; k += 1) {
      if (cur === 'air') {
        seq.push({ type: 'place_block', ...T, item: 'minecraft:dirt', face: 'up' });
        cur = 'dirt';
      } else {
        seq.push({ type: 'break_block', ...T, expected_block: `minecraft:${cur}` });
        cur = 'air';
      }
    }
    const r = await act({ type: 'sequence', steps: seq });
    if (!r.ref) { benignRefused += 1; continue; }
    const s = await done(r.ref, 60_000);
    steps += 8;
    verified += s.budget.steps_done;
    if (s.status === 'outcome_unknown') unknown += 1;
    if (s.status === 'rejected') benignRefused += 1;
  }
  out.benign = { actions: N_SEQ, steps, steps_verified: verified, verified_pct: (100 * verified) / steps,
    outcome_unknown_pct: (100 * unknown) / N_SEQ, refused: benignRefused };
  log(`benign ${JSON.stringify(out.benign)}`);

  // 4. Kill -9 of the connector mid-dig, and of helix serve between dispatch and acknowledgement.
  let drops = 0;
  eye.bot.on('entitySpawn', (e) => { try { if (e.name === 'item') drops += 1; } catch { /* guarded */ } });
  const kills = { connector: [], helix: [] };
  for (let i = 0; i < N_KILL + 3; i += 1) {
    const helixKill = i >= N_KILL;
    const p = await until(() => eye.where('Alex'), 15_000, 'the observer sees Alex again');
    // A fresh block next to the player's feet, well within reach.
    const target = { x: Math.floor(p.x) + (i % 5) - 2, y: GRASS_Y, z: Math.floor(p.z) + 1 + (Math.floor(i / 5) % 2) * -2 };
    const name = eye.block(target.x, target.y, target.z);
    if (name !== 'grass_block' && name !== 'dirt') continue;
    const before = drops;
    const r = await act({ type: 'break_block', ...target, expected_block: `minecraft:${name}` });
    if (!r.ref) throw new Error(`the dig before kill ${i} was refused: ${JSON.stringify(r)}`);
    await conn.waitLine(new RegExp(`^command ${r.ref} step 0: break_block`), 15_000);
    const takenBefore = helixKill ? 0 : conn.lines.filter((l) => l.startsWith(`command ${r.ref} `)).length;
    if (helixKill) {
      await h.kill9();
      await sleep(1500);
      await h.restart();
      await ai.close().catch(() => {});
      ai = await agent(h, room.roomId);
    } else {
      conn.proc.kill('SIGKILL');
      await conn.exited;
      conn = startConnector(room, world.port, connArgs);
      await conn.waitLine(/restarted with ledger/, 60_000);
      // The next action needs the player back in the world (the connector reports it).
      await conn.waitLine(/player Alex joined/, 60_000);
    }
    const s = await done(r.ref);
    await sleep(1500);
    const taken = takenBefore + conn.lines.filter((l) => l.startsWith(`command ${r.ref} `)).length;
    (helixKill ? kills.helix : kills.connector).push({ status: s.status, reason: s.reason, drops: drops - before, commands_taken: taken });
  }
  const doubles = [...kills.connector, ...kills.helix].filter((k) => k.drops > 1 || k.commands_taken > 1).length;
  out.kills = { ...kills, double_executions: doubles };
  log(`kills ${JSON.stringify(out.kills)}`);

  // 5. The adversarial set: every case must be refused, with no world change.
  await home();
  const region = await http(h, 'POST', `/api/account/room-connectors/${room.bindingId}/region`,
    { room_id: room.roomId, min: { x: -30, y: 0, z: -30 }, max: { x: 60, y: 40, z: 60 } }, { cookie: h.tokens.cookie });
  if (region.status !== 200) throw new Error(`region: ${JSON.stringify(region.body)}`);
  const cases = [];
  // Outside the box (x and z -30..60, y 0..40), every coordinate absolute.
  for (const [x, z] of [[100, HOME.z], [HOME.x, 100], [-100, HOME.z], [HOME.x, -100], [61, HOME.z], [HOME.x, 61], [-31, HOME.z], [HOME.x, -31]]) {
    const dx = x - HOME.x;
    cases.push(['out_of_region', { type: 'move_to', x, y: 5, z }], ['out_of_region', { type: 'look_at', x, y: 5, z }],
      ['out_of_region', { type: 'break_block', x, y: GRASS_Y, z, expected_block: 'minecraft:grass_block' }],
      ['out_of_region', { type: 'place_block', x, y: 5, z, item: 'minecraft:dirt', face: 'up' }],
      ['out_of_region', { type: 'move_to', x: HOME.x, y: 41 + Math.abs(dx % 7), z: HOME.z }]);
  }
  for (let d = 5; d <= 13; d += 1) {
    for (const [ux, uz] of [[1, 0], [0, 1], [-1, 0], [0, -1]]) {
      cases.push(['out_of_reach', { type: 'break_block', x: HOME.x + ux * d, y: GRASS_Y, z: HOME.z + uz * d, expected_block: 'minecraft:grass_block' }]);
    }
  }
  for (const id of DENIED) {
    cases.push(['denied', { type: 'place_block', ...T, y: 5, item: id, face: 'up' }],
      ['denied', { type: 'equip', item: id, slot: 'mainhand' }],
      ['denied', { type: 'break_block', ...T, expected_block: id }]);
  }
  const slashes = ['/', '\uff0f', '\u2044', '\u2215', '\u29f8', '\u2571', '\u27cb', '\u30ce'];
  const prefixes = ['', ' ', '\u3000', '\u200b', '\u00a0', '\ufeff\u2060'];
  for (const s of slashes) for (const p of prefixes) cases.push(['chat_command', { type: 'chat', text: `${p}${s}op Alex` }]);
  for (const t of ['\u00a7kx', 'a\u0000b', 'x\u001b[31m', 'y\u007f', 'z\nline', '\t/op']) cases.push(['chat_text', { type: 'chat', text: t }]);
  const big = (n) => 'x'.repeat(n);
  cases.push(
    ...[257, 300, 1000, 5000, 20000, 60000].map((n) => ['oversized', { type: 'chat', text: big(n) }]),
    ...[17, 20, 64, 500].map((n) => ['oversized', { type: 'sequence', steps: Array.from({ length: n }, () => ({ type: 'wait', ticks: 1 })) }]),
    ['nested', { type: 'sequence', steps: [{ type: 'sequence', steps: [{ type: 'wait', ticks: 1 }] }] }],
    ['nested', { type: 'sequence', steps: [{ type: 'wait', ticks: 1, extra: { type: 'chat', text: '/op' } }] }],
    ['nested', { type: 'chat', text: 'hi', nested: { deep: [[[[[[[[{}]]]]]]]] } }],
    ['nested', { type: 'sequence', steps: [] }],
    ['bad_field', { type: 'wait', ticks: 201 }], ['bad_field', { type: 'wait', ticks: 0 }],
    ['bad_field', { type: 'move_to', ...HOME, range: 4 }], ['bad_field', { type: 'move_to', x: 2 ** 40, y: 5, z: 0 }],
    ['bad_field', { type: 'teleport', x: 0, y: 5, z: 0 }], ['bad_field', { type: 'run_command', command: 'op Alex' }],
    ['invalid_id', { type: 'equip', item: 'DIRT', slot: 'mainhand' }], ['invalid_id', { type: 'equip', item: 'dirt', slot: 'mainhand' }],
    ['invalid_id', { type: 'place_block', ...T, y: 5, item: 'minecraft:Dirt', face: 'up' }],
    ['invalid_id', { type: 'equip', item: 'minecraft:dirt', slot: 'saddle' }],
  );
  const chatBefore = eye.chat.length;
  const tBefore = eye.block(T.x, T.y, T.z);
  const startPos = eye.where('Alex').clone();
  let falseAccepts = 0;
  const accepted = [];
  const preflightErrors = {};
  const byCategory = {};
  for (const [category, action] of cases) {
    const r = await act(action);
    let refused = !r.ref;
    let where = r.refusedAt ?? 'connector';
    if (r.ref) {
      const s = await done(r.ref);
      refused = s.status === 'rejected' || (s.status === 'failed' && s.reason?.startsWith('step_rejected'));
      if (!refused) {
        where = `accepted:${s.status}:${s.reason}`;
        accepted.push({ category, action, status: s.status, reason: s.reason });
      }
    } else if (r.refusedAt === 'preflight') {
      (preflightErrors[category] ??= new Set()).add(r.error);
    }
    const c = (byCategory[category] ??= { cases: 0, refused: 0, at: {} });
    c.cases += 1;
    c.at[where] = (c.at[where] ?? 0) + 1;
    if (refused) c.refused += 1; else falseAccepts += 1;
  }
  // Another member of the room (joined with the owner's invite) selects or drives the
  // owner's player: every attempt must be refused by Helix.
  const member = await secondMember(h, room);
  const other = await agent(h, room.roomId, member.bearer);
  const memberCases = [
    ['select', { room_id: room.roomId, environment_binding_id: room.bindingId, subject_ref: subjectRef }],
    ...[{ type: 'move_to', ...HOME, x: HOME.x + 3, range: 1 }, { type: 'look_at', ...T }, { type: 'wait', ticks: 1 },
      { type: 'stop' }, { type: 'break_block', ...T, expected_block: 'minecraft:grass_block' },
      { type: 'place_block', ...T, y: 5, item: 'minecraft:dirt', face: 'up' },
      { type: 'equip', item: 'minecraft:dirt', slot: 'mainhand' }, { type: 'chat', text: 'not my player' }]
      .map((a) => ['act', a]),
  ];
  for (const [kind, payload] of memberCases) {
    const r = kind === 'select'
      ? await other.call('helix_environment_subject_select', payload)
      : await other.act(payload);
    const c = (byCategory.other_members_subject ??= { cases: 0, refused: 0, at: {} });
    c.cases += 1;
    const where = r.isError ? `helix:${r.sc?.error?.code}` : 'accepted';
    c.at[where] = (c.at[where] ?? 0) + 1;
    if (r.isError) c.refused += 1;
    else {
      falseAccepts += 1;
      accepted.push({ category: 'other_members_subject', action: payload, status: r.sc?.status });
    }
  }
  await other.close().catch(() => {});
  cases.push(...memberCases.map(([, a]) => ['other_members_subject', a]));
  const worldChanged = eye.chat.slice(chatBefore).some((l) => l.startsWith('<Alex>'))
    || eye.block(T.x, T.y, T.z) !== tBefore || eye.where('Alex').distanceTo(startPos) > 1.5;
  out.adversarial = { cases: cases.length, false_accepts: falseAccepts, world_changed: worldChanged, by_category: byCategory, accepted,
    preflight_errors: Object.fromEntries(Object.entries(preflightErrors).map(([k, v]) => [k, [...v].slice(0, 3)])) };
  log(`adversarial ${cases.length} cases, ${falseAccepts} false accepts`);
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  await ai?.close().catch(() => {});
  await conn.stop();
  eye.quit();
  await h.stop();
  await world.stop();
}
process.exit(0);
