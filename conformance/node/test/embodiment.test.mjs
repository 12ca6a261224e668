// The five player-embodiment tools and Device Check on `/mcp`, driven by the official MCP
// TypeScript SDK against a real `helix serve`, with a connector on the southbound routes:
// a scripted one (each workflow state on purpose) and the reference `helix connector-sim`.
// Every result, success or error, is validated against the tool's published outputSchema
// with ajv (draft 2020-12), besides the SDK's own check of successful results.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { helixBin, withHelix } from '../lib/helix-server.mjs';
import { key } from '../lib/helix-mcp.mjs';
import {
  CheckedTools, EMBODIMENT_TOOLS, ScriptedConnector, ack, http, pairedRoom, prepareEmbodiment,
} from '../lib/embodiment.mjs';

const STEVE = 'sim-native-steve';
const STEP_DEADLINE_MS = 30_000; // core/src/service/embodiment/mod.rs
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Selects the room's first subject for the caller; returns its subject_ref. */
async function selectFirst(tools, w, secret) {
  const listing = await tools.ok('helix_environment_subject_list', { room_id: w.roomId });
  assert.ok(!JSON.stringify(listing).includes(secret), 'a native id is never shown northbound');
  assert.ok(!JSON.stringify(listing).includes(w.credential), 'the connector credential is never shown');
  const env = listing.environments.find((e) => e.environment_binding_id === w.bindingId);
  const subject = env.subjects[0].subject_ref;
  const sel = await tools.ok('helix_environment_subject_select',
    { room_id: w.roomId, environment_binding_id: w.bindingId, subject_ref: subject });
  assert.equal(sel.subject_ref, subject);
  return subject;
}

test('scripted connector: every reachable workflow state and typed error matches the published outputSchema', () =>
  withHelix(async (h) => {
    const w = await pairedRoom(h);
    const conn = new ScriptedConnector(h, w.credential);
    const reg = await conn.register([{ native_id: STEVE, display_name: 'Steve', online: true }]);
    assert.equal(reg.epoch, 1);
    const tools = await CheckedTools.open(h);
    const act = (action, idem = key('act')) =>
      tools.call('helix_minecraft_player_action', { room_id: w.roomId, idempotency_key: idem, action });
    const queue = async (action) => {
      const { isError, sc } = await act(action);
      assert.ok(!isError, JSON.stringify(sc));
      assert.equal(sc.status, 'queued');
      assert.ok(sc.poll_after_ms > 0, 'the tool answers at once with a poll hint');
      return sc.workflow_ref;
    };
    const status = (ref) => tools.ok('helix_minecraft_workflow_status', { room_id: w.roomId, workflow_ref: ref });
    const control = (ref, c) => tools.call('helix_minecraft_workflow_control', { room_id: w.roomId, workflow_ref: ref, control: c });
    const expectStatus = async (ref, want, reason) => {
      const s = await status(ref);
      assert.equal(s.status, want, JSON.stringify(s));
      if (reason !== undefined) assert.equal(s.reason, reason, JSON.stringify(s));
      return s;
    };
    try {
      for (const name of EMBODIMENT_TOOLS) assert.ok(tools.names().includes(name), `${name} listed on /mcp`);
      const report = await tools.ok('helix_environment_device_check', {});
      assert.ok(!JSON.stringify(report).includes(w.credential));

      // Typed errors before a subject is selected.
      await tools.err('helix_minecraft_player_action',
        { room_id: w.roomId, idempotency_key: key('act'), action: { type: 'wait', ticks: 5 } }, 'subject_not_selected');
      const bogus = await tools.call('helix_environment_subject_select',
        { room_id: w.roomId, environment_binding_id: w.bindingId, subject_ref: `sub_${'0'.repeat(20)}` });
      assert.ok(bogus.isError, JSON.stringify(bogus.sc));
      await tools.err('helix_minecraft_workflow_status', { room_id: w.roomId, workflow_ref: `wf_${'0'.repeat(20)}` }, 'not_found');
      await tools.err('helix_environment_subject_list', { room_id: `room_${'0'.repeat(20)}` }, 'not_found');
      await selectFirst(tools, w, STEVE);

      // Refusals of the action itself: the published inputSchema (a tool result naming the
      // field and the rule, nothing queued) and the service's own bounds (a typed
      // action_refused result).
      const offSchema = async (action, field, rule) => {
        const r = await act(action);
        assert.ok(r.isError && r.sc.error.code === 'invalid_request', JSON.stringify(r.sc));
        assert.deepEqual(r.sc.error.details, { field, rule });
      };
      await offSchema({ type: 'teleport', x: 0, y: 64, z: 0 }, 'action.type',
        'must be one of "move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait", "sequence"');
      await offSchema({ type: 'wait', ticks: 201 }, 'action.ticks', 'must be at most 200');
      const chat = await act({ type: 'chat', text: '/op me' });
      assert.ok(chat.isError && chat.sc.error.code === 'action_refused', JSON.stringify(chat.sc));
      assert.equal(chat.sc.error.details.reason, 'chat_command');
      const denied = await act({ type: 'place_block', x: 1, y: 64, z: 1, item: 'minecraft:tnt', face: 'up' });
      assert.ok(denied.isError && denied.sc.error.details.reason === 'denied', JSON.stringify(denied.sc));

      // queued -> dispatched -> running -> succeeded (the postcondition read from the observation).
      const moveKey = key('move');
      const move = { type: 'move_to', x: 3, y: 64, z: 1 };
      const { sc: queued } = await act(move, moveKey);
      assert.equal(queued.status, 'queued');
      const ref = queued.workflow_ref;
      assert.equal(queued.late_effects_possible, false);
      await expectStatus(ref, 'queued');
      let cmd = await conn.commandFor(ref);
      assert.deepEqual(cmd.step, { type: 'move_to', x: 3, y: 64, z: 1, range: 1 });
      assert.equal(cmd.native_id, STEVE, 'only the connector sees the native id');
      assert.equal((await expectStatus(ref, 'dispatched')).late_effects_possible, true);
      await conn.poll([ack(cmd, 1, 'accepted')]);
      await expectStatus(ref, 'running');
      await conn.poll([ack(cmd, 2, 'progress')]);
      await expectStatus(ref, 'running');
      await conn.poll([ack(cmd, 3, 'completed', { position: [3, 64, 2] })]);
      let s = await expectStatus(ref, 'succeeded');
      assert.equal(s.poll_after_ms, null);
      assert.deepEqual(s.budget.steps_done, 1);
      assert.ok(s.last_observation_at, 'the observation time is reported');
      await conn.poll([ack(cmd, 4, 'completed', { position: [3, 64, 2] })], 'not_at_connector');
      const replay = await act(move, moveKey);
      assert.equal(replay.sc.workflow_ref, ref, 'an exact retry replays the one workflow');
      const conflict = await act({ type: 'wait', ticks: 1 }, moveKey);
      assert.ok(conflict.isError && conflict.sc.error.code === 'idempotency_conflict', JSON.stringify(conflict.sc));

      // failed: postcondition_unmet (the connector said "completed", the block did not change).
      const brk = await queue({ type: 'break_block', x: 5, y: 64, z: 5, expected_block: 'minecraft:oak_log' });
      cmd = await conn.commandFor(brk);
      await conn.poll([ack(cmd, 1, 'completed', { block_at_target: 'minecraft:oak_log' })]);
      await expectStatus(brk, 'failed', 'postcondition_unmet');

      // verifying: sent, its effect not readable yet (`completed` without an observation);
      // the echo on a later `completed` decides.
      const hello = await queue({ type: 'chat', text: 'hello' });
      cmd = await conn.commandFor(hello);
      await conn.poll([ack(cmd, 1, 'accepted'), ack(cmd, 2, 'completed')]);
      s = await expectStatus(hello, 'verifying');
      assert.equal(s.late_effects_possible, true);
      assert.ok(s.poll_after_ms > 0);
      assert.ok(!(await conn.poll()).commands.some((x) => x.workflow_ref === hello), 'not delivered again');
      await conn.poll([ack(cmd, 3, 'completed', { chat_echo: 'hello' })]);
      await expectStatus(hello, 'succeeded');

      // failed: step_failed (the connector reports the step failed without a world change).
      const craft = await queue({ type: 'craft', item: 'minecraft:oak_planks', times: 2 });
      cmd = await conn.commandFor(craft);
      await conn.poll([ack(cmd, 1, 'accepted'), ack(cmd, 2, 'failed', null, 'missing_ingredients')]);
      await expectStatus(craft, 'failed', 'step_failed:missing_ingredients');

      // rejected: the connector refuses the first step instead of accepting it (the world untouched);
      // a later acknowledgement of it is not_at_connector and it is never delivered again.
      const sword = { type: 'equip', item: 'minecraft:diamond_sword', slot: 'mainhand' };
      const refusedEquip = await queue(sword);
      cmd = await conn.commandFor(refusedEquip);
      await conn.poll([ack(cmd, 1, 'rejected', null, 'not_in_inventory')]);
      s = await expectStatus(refusedEquip, 'rejected', 'not_in_inventory');
      assert.equal(s.late_effects_possible, false);
      assert.equal(s.poll_after_ms, null);
      await conn.poll([ack(cmd, 2, 'completed', { equipped: 'minecraft:diamond_sword' })], 'not_at_connector');
      assert.ok(!(await conn.poll()).commands.some((x) => x.workflow_ref === refusedEquip), 'never delivered again');
      const rejectedResume = await control(refusedEquip, 'resume');
      assert.ok(rejectedResume.isError && rejectedResume.sc.error.code === 'workflow_not_resumable',
        JSON.stringify(rejectedResume.sc));

      // A later step refused: failed: step_rejected:<reason> (the earlier step did run).
      const laterRefused = await queue({ type: 'sequence', steps: [{ type: 'wait', ticks: 5 }, sword] });
      cmd = await conn.commandFor(laterRefused);
      await conn.poll([ack(cmd, 1, 'completed', { position: [3, 64, 2] })]);
      cmd = await conn.commandFor(laterRefused);
      assert.equal(cmd.step_index, 1);
      await conn.poll([ack(cmd, 1, 'rejected', null, 'not_in_inventory')]);
      await expectStatus(laterRefused, 'failed', 'step_rejected:not_in_inventory');

      // rejected at dispatch: the owner narrowed the region (cookie route) after it was queued.
      const far = await queue({ type: 'move_to', x: 20, y: 64, z: 0 });
      const regionPath = `/api/account/room-connectors/${w.bindingId}/region`;
      const narrowed = await http(h, 'POST', regionPath,
        { room_id: w.roomId, min: { x: -10, y: 0, z: -10 }, max: { x: 10, y: 100, z: 10 } }, { cookie: h.tokens.cookie });
      assert.equal(narrowed.status, 200, JSON.stringify(narrowed.body));
      assert.equal(narrowed.body.schema, 'helix.room_connector_region.v1');
      assert.ok(!(await conn.poll()).commands.some((x) => x.workflow_ref === far), 'not dispatched');
      s = await expectStatus(far, 'rejected', 'out_of_region');
      assert.equal(s.late_effects_possible, false);
      const unboxed = await http(h, 'POST', regionPath, { room_id: w.roomId, clear: true }, { cookie: h.tokens.cookie });
      assert.equal(unboxed.status, 200, JSON.stringify(unboxed.body));
      assert.equal(unboxed.body.region, null);

      // A sequence: each verified step dispatches the next under a fresh lease.
      const seq = await queue({ type: 'sequence', steps: [{ type: 'wait', ticks: 5 }, { type: 'chat', text: 'hello' }] });
      cmd = await conn.commandFor(seq);
      await conn.poll([ack(cmd, 1, 'completed', { position: [3, 64, 2] })]);
      s = await expectStatus(seq, 'dispatched');
      assert.equal(s.step, 1);
      const second = await conn.commandFor(seq);
      assert.equal(second.step_index, 1);
      assert.notEqual(second.lease_token, cmd.lease_token);
      await conn.poll([ack(cmd, 2, 'completed', { position: [3, 64, 2] })], 'lease_mismatch');
      await conn.poll([ack(second, 1, 'completed', { chat_echo: 'hello' })]);
      s = await expectStatus(seq, 'succeeded');
      assert.equal(s.budget.steps_done, 2);
      assert.equal(s.budget.steps_total, 2);

      // A person takes the controls: paused (manual_override), resume, then succeeded.
      const held = await queue({ type: 'wait', ticks: 100 });
      cmd = await conn.commandFor(held);
      await conn.poll([ack(cmd, 1, 'accepted'), ack(cmd, 2, 'overridden')]);
      await expectStatus(held, 'paused', 'manual_override');
      const resumed = await control(held, 'resume');
      assert.ok(!resumed.isError && resumed.sc.status === 'queued', JSON.stringify(resumed.sc));
      const again = await conn.commandFor(held);
      assert.notEqual(again.lease_token, cmd.lease_token, 'a resumed step runs under a fresh lease');
      await conn.poll([ack(cmd, 3, 'completed', { position: [3, 64, 2] })], 'lease_mismatch');
      await conn.poll([ack(again, 1, 'completed', { position: [3, 64, 2] })]);
      await expectStatus(held, 'succeeded');
      const notPaused = await control(held, 'resume');
      assert.ok(notPaused.isError && notPaused.sc.error.code === 'workflow_not_resumable', JSON.stringify(notPaused.sc));

      // cancel: a queued workflow is cancelled at once, and cancel is idempotent on it.
      const early = await queue({ type: 'wait', ticks: 10 });
      for (let i = 0; i < 2; i++) {
        const c = await control(early, 'cancel');
        assert.ok(!c.isError && c.sc.status === 'cancelled', JSON.stringify(c.sc));
      }
      // cancel at the connector: cancel_requested, in the poll's cancel list, then cancelled.
      const late = await queue({ type: 'wait', ticks: 100 });
      cmd = await conn.commandFor(late);
      await conn.poll([ack(cmd, 1, 'accepted')]);
      const c = await control(late, 'cancel');
      assert.ok(!c.isError && c.sc.status === 'cancel_requested', JSON.stringify(c.sc));
      assert.equal(c.sc.late_effects_possible, true);
      const withCancel = await conn.poll();
      assert.ok(withCancel.cancel.includes(late), JSON.stringify(withCancel));
      await conn.poll([ack(cmd, 2, 'completed', { position: [3, 64, 2] })]);
      await expectStatus(late, 'cancelled');

      // outcome_unknown: a mutating step interrupted mid-way is never retried blindly.
      const place = await queue({ type: 'place_block', x: 8, y: 64, z: 8, item: 'minecraft:dirt', face: 'up' });
      cmd = await conn.commandFor(place);
      await conn.poll([ack(cmd, 1, 'accepted'), ack(cmd, 2, 'interrupted')]);
      await expectStatus(place, 'outcome_unknown', 'interrupted');
      assert.ok(!(await conn.poll()).commands.some((x) => x.workflow_ref === place), 'never delivered again');

      // A new registration (epoch 2) pauses what the old one held; the old epoch is fenced off.
      const fenced = await queue({ type: 'wait', ticks: 100 });
      cmd = await conn.commandFor(fenced);
      await conn.poll([ack(cmd, 1, 'accepted')]);
      const oldEpoch = conn.epoch;
      assert.equal((await conn.register([{ native_id: STEVE, display_name: 'Steve', online: true }])).epoch, oldEpoch + 1);
      await expectStatus(fenced, 'paused', 'connector_epoch_changed');
      const stale = await http(h, 'POST', '/api/connectors/v1/poll',
        { epoch: oldEpoch, acks: [ack(cmd, 2, 'completed', { position: [3, 64, 2] })] }, { bearer: w.credential });
      assert.equal(stale.status, 409);
      assert.equal(stale.body.error.code, 'connector_epoch_stale');
      assert.equal(stale.body.error.details.current_epoch, oldEpoch + 1);
      await expectStatus(fenced, 'paused');
      assert.equal((await control(fenced, 'resume')).sc.status, 'queued');
      cmd = await conn.commandFor(fenced);
      await conn.poll([ack(cmd, 1, 'completed', { position: [3, 64, 2] })]);
      await expectStatus(fenced, 'succeeded');

      // A step past its deadline: timed_out (nothing mutated) or outcome_unknown (a running
      // mutation), and both in the cancel list.
      const slow = await queue({ type: 'wait', ticks: 200 });
      const slowMut = await queue({ type: 'break_block', x: 6, y: 64, z: 5, expected_block: 'minecraft:oak_log' });
      const started = Date.now();
      const r = await conn.poll();
      const slowCmds = r.commands.filter((x) => [slow, slowMut].includes(x.workflow_ref));
      assert.equal(slowCmds.length, 2, JSON.stringify(r));
      await conn.poll(slowCmds.map((x) => ack(x, 1, 'accepted')));
      await expectStatus(slow, 'running');
      await sleep(STEP_DEADLINE_MS - (Date.now() - started) + 1500);
      const overdue = await conn.poll();
      assert.ok(overdue.cancel.includes(slow) && overdue.cancel.includes(slowMut), JSON.stringify(overdue));
      await expectStatus(slow, 'timed_out', 'step_deadline_passed');
      await expectStatus(slowMut, 'outcome_unknown', 'step_deadline_passed');

      // Emergency Stop: every open workflow stopped, the connector told on its next poll,
      // new actions refused until a person clears it in the browser (an agent cannot).
      const last = await queue({ type: 'wait', ticks: 50 });
      const stop = await control(last, 'emergency_stop');
      assert.ok(!stop.isError && stop.sc.status === 'stopped', JSON.stringify(stop.sc));
      const halted = await conn.poll();
      assert.equal(halted.emergency_stop_active, true);
      assert.ok(halted.emergency_stop_generation >= 1);
      assert.deepEqual(halted.commands, []);
      const refused = await act({ type: 'wait', ticks: 1 });
      assert.ok(refused.isError && refused.sc.error.code === 'emergency_stop_active', JSON.stringify(refused.sc));
      const noResume = await control(last, 'resume');
      assert.ok(noResume.isError && noResume.sc.error.code === 'workflow_not_resumable', JSON.stringify(noResume.sc));
      const cleared = await http(h, 'POST', '/api/account/room-connectors/emergency-stop/clear',
        { room_id: w.roomId, environment_binding_id: w.bindingId }, { cookie: h.tokens.cookie });
      assert.ok(cleared.status < 300, JSON.stringify(cleared.body));
      const afterClear = await queue({ type: 'wait', ticks: 1 });
      assert.equal((await conn.poll()).emergency_stop_active, false);
      await expectStatus(afterClear, 'dispatched');
    } finally {
      await tools.close();
    }
    const statuses = tools.seen.helix_minecraft_workflow_status;
    for (const st of ['queued', 'dispatched', 'running', 'verifying', 'succeeded', 'failed', 'paused', 'cancelled',
      'timed_out', 'outcome_unknown', 'rejected']) {
      assert.ok(statuses.has(st), `status ${st} observed: ${[...statuses]}`);
    }
    const controlled = tools.seen.helix_minecraft_workflow_control;
    for (const st of ['queued', 'cancelled', 'cancel_requested', 'stopped', 'workflow_not_resumable']) {
      assert.ok(controlled.has(st), `control ${st} observed: ${[...controlled]}`);
    }
    for (const reason of ['postcondition_unmet', 'step_failed:missing_ingredients', 'manual_override',
      'connector_epoch_changed', 'interrupted', 'step_deadline_passed', 'not_in_inventory',
      'step_rejected:not_in_inventory', 'out_of_region']) {
      assert.ok(tools.reasons.has(reason), `reason ${reason} observed: ${[...tools.reasons]}`);
    }
    assert.deepEqual(Object.keys(tools.seen).sort(), [...EMBODIMENT_TOOLS].sort());
  }, {}, prepareEmbodiment));

test('a workflow never dispatched within the queue time is expired, and its result matches the outputSchema', () =>
  withHelix(async (h) => {
    // The queue time is the operator's HELIX_EMBODIMENT_QUEUE_TTL_SECS (2 s here, 600 by default).
    const w = await pairedRoom(h);
    const conn = new ScriptedConnector(h, w.credential);
    await conn.register([{ native_id: STEVE, display_name: 'Steve', online: true }]);
    const tools = await CheckedTools.open(h);
    const call = (name, args) => tools.call(name, { room_id: w.roomId, ...args });
    try {
      await selectFirst(tools, w, STEVE);
      const { isError, sc } = await call('helix_minecraft_player_action',
        { idempotency_key: key('act'), action: { type: 'wait', ticks: 5 } });
      assert.ok(!isError && sc.status === 'queued', JSON.stringify(sc));
      const ref = { workflow_ref: sc.workflow_ref };
      // No poll in between: the connector never saw it. Whole seconds are compared.
      await sleep(3200);
      const s = await tools.ok('helix_minecraft_workflow_status', { room_id: w.roomId, ...ref });
      assert.equal(s.status, 'expired', JSON.stringify(s));
      assert.equal(s.reason, 'not_dispatched_in_time');
      assert.equal(s.poll_after_ms, null);
      assert.equal(s.late_effects_possible, false);
      assert.ok(!(await conn.poll()).commands.some((x) => x.workflow_ref === sc.workflow_ref), 'never dispatched');
      const cancel = await call('helix_minecraft_workflow_control', { ...ref, control: 'cancel' });
      assert.ok(!cancel.isError && cancel.sc.status === 'expired', 'cancel is idempotent on a terminal state');
      const resume = await call('helix_minecraft_workflow_control', { ...ref, control: 'resume' });
      assert.ok(resume.isError && resume.sc.error.code === 'workflow_not_resumable', JSON.stringify(resume.sc));
    } finally {
      await tools.close();
    }
    assert.ok(tools.seen.helix_minecraft_workflow_status.has('expired'));
  }, { HELIX_EMBODIMENT_QUEUE_TTL_SECS: '2' }, prepareEmbodiment));

/** Starts `helix connector-sim` on the pairing's configuration; resolves once it registered. */
async function startSim(h, w, tmpName, extra = []) {
  const path = join(h.dataDir, '..', tmpName);
  writeFileSync(path, JSON.stringify(w.config));
  const sim = spawn(helixBin(), ['connector-sim', '--config', path, '--interval-ms', '100', ...extra], {
    env: { ...process.env, HELIX_CONNECTOR_CREDENTIAL: w.credential },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  sim.out = '';
  sim.stdout.on('data', (d) => { sim.out += d; });
  sim.stderr.on('data', (d) => { sim.out += d; });
  for (let i = 0; i < 100 && !sim.out.includes('registered environment'); i++) await sleep(100);
  assert.ok(sim.out.includes('registered environment'), `connector-sim did not register:\n${sim.out}`);
  assert.ok(!sim.out.includes(w.credential), 'the simulator never prints its credential');
  return sim;
}

const stopSim = (sim) => new Promise((r) => {
  if (sim.exitCode !== null) return r();
  sim.on('exit', () => r());
  sim.kill('SIGTERM');
});

/** Polls the workflow's status until it leaves `passing` states; returns the last status. */
async function settle(tools, w, ref, passing = ['queued', 'dispatched', 'running', 'verifying']) {
  let s;
  for (let i = 0; i < 200; i++) {
    s = await tools.ok('helix_minecraft_workflow_status', { room_id: w.roomId, workflow_ref: ref });
    if (!passing.includes(s.status)) return s;
    await sleep(50);
  }
  return s;
}

test('helix connector-sim: a verified sequence, an item the player lacks (rejected), a person taking the controls, a hazard, an Emergency Stop', () =>
  withHelix(async (h) => {
    const w = await pairedRoom(h);
    assert.equal(w.config.credential_env, 'HELIX_CONNECTOR_CREDENTIAL');
    assert.ok(!JSON.stringify(w.config).includes(w.credential), 'the configuration carries no credential');
    const sim = await startSim(h, w, 'connector.json');
    const tools = await CheckedTools.open(h);
    const act = (action) => tools.ok('helix_minecraft_player_action', { room_id: w.roomId, idempotency_key: key('sim'), action });
    const control = (ref, c) => tools.ok('helix_minecraft_workflow_control', { room_id: w.roomId, workflow_ref: ref, control: c });
    try {
      await selectFirst(tools, w, 'sim-');
      const sequence = { type: 'sequence', steps: [
        { type: 'move_to', x: 5, y: 64, z: 4 },
        { type: 'break_block', x: 5, y: 64, z: 5, expected_block: 'minecraft:oak_log' },
        { type: 'craft', item: 'minecraft:oak_planks', times: 1 },
        { type: 'equip', item: 'minecraft:oak_planks', slot: 'mainhand' },
        { type: 'chat', text: 'done' },
      ] };
      const wf = await act(sequence);
      assert.equal(wf.status, 'queued');
      let s = await settle(tools, w, wf.workflow_ref);
      assert.equal(s.status, 'succeeded', JSON.stringify(s));
      assert.equal(s.budget.steps_done, 5);
      assert.equal(s.budget.block_changes_used, 1);
      assert.equal((await control(wf.workflow_ref, 'cancel')).status, 'succeeded', 'cancel is idempotent on a terminal state');

      // The same log is gone now: the simulator's world is stateful, so the break fails.
      const gone = await act({ type: 'break_block', x: 5, y: 64, z: 5, expected_block: 'minecraft:oak_log' });
      s = await settle(tools, w, gone.workflow_ref);
      assert.deepEqual([s.status, s.reason], ['failed', 'step_failed:unexpected_block']);

      // An item the player does not carry: the simulator refuses before touching its world.
      const lacking = await act({ type: 'equip', item: 'minecraft:diamond_sword', slot: 'mainhand' });
      s = await settle(tools, w, lacking.workflow_ref);
      assert.deepEqual([s.status, s.reason, s.late_effects_possible], ['rejected', 'not_in_inventory', false]);

      // SIGUSR1: a person takes the controls of the running player; resume; it finishes.
      const held = await act({ type: 'wait', ticks: 200 });
      s = await settle(tools, w, held.workflow_ref, ['queued', 'dispatched']);
      assert.equal(s.status, 'running', JSON.stringify(s));
      sim.kill('SIGUSR1');
      s = await settle(tools, w, held.workflow_ref, ['running']);
      assert.deepEqual([s.status, s.reason], ['paused', 'manual_override']);
      assert.match(sim.out, /a person took the controls: wf_/);
      assert.equal((await control(held.workflow_ref, 'resume')).status, 'queued');
      s = await settle(tools, w, held.workflow_ref);
      assert.equal(s.status, 'succeeded', JSON.stringify(s));

      // Emergency Stop of a running action: stopped, and the simulator halts its player.
      const run = await act({ type: 'wait', ticks: 200 });
      s = await settle(tools, w, run.workflow_ref, ['queued', 'dispatched']);
      assert.equal(s.status, 'running');
      assert.equal((await control(run.workflow_ref, 'emergency_stop')).status, 'stopped');
      for (let i = 0; i < 50 && !sim.out.includes('Emergency Stop'); i++) await sleep(100);
      assert.match(sim.out, /Emergency Stop \(generation 1\): every player halted/);
      const refused = await tools.call('helix_minecraft_player_action',
        { room_id: w.roomId, idempotency_key: key('sim'), action: { type: 'wait', ticks: 1 } });
      assert.equal(refused.sc.error.code, 'emergency_stop_active');
    } finally {
      await tools.close();
      await stopSim(sim);
    }

    // --hazard in a second room: every block break fails without a world change (the log is
    // out of reach of where the player starts, so the sequence walks up to it first).
    const w2 = await pairedRoom(h, 'Hazard');
    const hazard = await startSim(h, w2, 'hazard.json', ['--hazard']);
    const tools2 = await CheckedTools.open(h);
    try {
      await selectFirst(tools2, w2, 'sim-');
      const wf = await tools2.ok('helix_minecraft_player_action', { room_id: w2.roomId, idempotency_key: key('hz'),
        action: { type: 'sequence', steps: [{ type: 'move_to', x: 6, y: 64, z: 4 },
          { type: 'break_block', x: 6, y: 64, z: 5, expected_block: 'minecraft:oak_log' }] } });
      const s = await settle(tools2, w2, wf.workflow_ref);
      assert.deepEqual([s.status, s.reason], ['failed', 'step_failed:hazard']);
    } finally {
      await tools2.close();
      await stopSim(hazard);
    }
  }, {}, prepareEmbodiment));
