// Shared Live Room tools driven by the official TypeScript SDK: the SDK validates every
// structured result against the tool's published outputSchema.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withHelix } from '../lib/helix-server.mjs';
import { connect, callOk, callErr, assertFalseFlags, securityScopes, startRequest, key } from '../lib/helix-mcp.mjs';

const ROOM_TOOLS = {
  helix_room_list: ['helix.rooms.read'],
  helix_room_inspect: ['helix.rooms.read'],
  helix_room_create: ['helix.rooms.manage'],
  helix_room_bind_run: ['helix.rooms.manage', 'helix.agent_runs.write'],
  helix_room_claim_chat_binding: ['helix.rooms.manage', 'helix.agent_runs.write'],
  helix_room_unbind_run: ['helix.rooms.manage', 'helix.agent_runs.write'],
  helix_room_unbind_chat: ['helix.rooms.manage', 'helix.agent_runs.write'],
  helix_room_command_request: ['helix.rooms.manage'],
};

test('room tools: listed with their scopes; create, bind, withdraw round trip', () => withHelix(async (helix) => {
  const { client, wire } = await connect(helix.mcpUrl, helix.tokens.rooms, { listTools: false });
  try {
    const { tools } = await client.listTools();
    const raw = Object.fromEntries(wire.filter((m) => m?.result?.tools).at(-1).result.tools.map((t) => [t.name, t]));
    for (const [name, scopes] of Object.entries(ROOM_TOOLS)) {
      assert.ok(tools.some((t) => t.name === name), `${name} listed`);
      assert.deepEqual(securityScopes(raw[name].securitySchemes), scopes, `${name} securitySchemes`);
      assert.deepEqual(securityScopes(raw[name]._meta.securitySchemes), scopes, `${name} _meta`);
      assert.ok(raw[name].outputSchema, `${name} outputSchema`);
    }
    const create = { idempotency_key: key('room'), request: { name: 'Casimir bench' } };
    const room = await callOk(client, 'helix_room_create', create);
    assert.equal(room.schema, 'helix.room.v1');
    assertFalseFlags(room, 'room');
    assert.deepEqual(await callOk(client, 'helix_room_create', create), room, 'an exact retry replays');
    const list = await callOk(client, 'helix_room_list', {});
    assert.deepEqual(list.rooms.map((r) => r.room_id), [room.room_id]);
    const run = await callOk(client, 'helix_run_start', { idempotency_key: key('start'), request: startRequest() });
    const bind = { request: { room_id: room.room_id, run_id: run.run_id } };
    const binding = await callOk(client, 'helix_room_bind_run', bind);
    assert.equal(binding.binding_status, 'active');
    assert.equal((await callOk(client, 'helix_room_bind_run', bind)).binding_ref, binding.binding_ref);
    const cmd = await callErr(client, 'helix_room_command_request', { room_id: room.room_id, request: { command: 'x' } });
    assert.equal(cmd.error.code, 'command_execution_not_enabled');
    const claim = await callErr(client, 'helix_room_claim_chat_binding',
      { request: { claim_handle: `hcc_${'0'.repeat(64)}`, run_id: run.run_id } });
    assert.equal(claim.error.code, 'claim_handle_invalid');
    const revoked = await callOk(client, 'helix_room_unbind_run', { binding_ref: binding.binding_ref });
    assert.equal(revoked.revocation_status, 'revoked');
    assert.ok(!JSON.stringify(revoked).includes(run.run_id), 'the withdrawal receipt names no run');
    const again = await callOk(client, 'helix_room_unbind_run', { binding_ref: binding.binding_ref });
    assert.equal(again.revocation_status, 'already_revoked');
  } finally {
    await client.close();
  }
}));
