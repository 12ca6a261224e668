// The one-tool Device Check MCP server (`/mcp/device-check`), driven by the official
// TypeScript SDK against a real `helix serve`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withHelix } from '../lib/helix-server.mjs';
import { connect, callOk, assertFalseFlags, key } from '../lib/helix-mcp.mjs';

test('device check: exactly one read-only tool, scoped helix.rooms.read, health without credentials', () =>
  withHelix(async (helix) => {
    const res = await fetch(`${helix.baseUrl}/api/v1/rooms`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${helix.tokens.rooms}`,
        'content-type': 'application/json',
        'idempotency-key': key('room'),
      },
      body: JSON.stringify({ name: 'Node SDK room' }),
    });
    assert.equal(res.status, 201);
    const room = await res.json();

    const { client, wire } = await connect(`${helix.baseUrl}/mcp/device-check`, helix.tokens.rooms, { listTools: false });
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['helix_environment_device_check']);
      assert.equal(tools[0].annotations?.readOnlyHint, true);
      assert.ok(tools[0].outputSchema, 'outputSchema published');
      const raw = wire.filter((m) => m?.result && Array.isArray(m.result.tools)).at(-1).result.tools;
      assert.deepEqual(raw[0].securitySchemes, [{ type: 'oauth2', scopes: ['helix.rooms.read'] }]);

      const report = await callOk(client, 'helix_environment_device_check', {});
      assert.equal(report.schema, 'helix.environment_device_check.v1');
      assertFalseFlags(report, 'device check report');
      const mine = report.rooms.find((r) => r.room_id === room.room_id);
      assert.ok(mine, `the caller's room is reported: ${JSON.stringify(report)}`);
      assert.deepEqual(mine.sources, []);
      assert.ok(!JSON.stringify(report).includes('hsb_'));

      await assert.rejects(client.callTool({ name: 'helix_run_start', arguments: {} }), 'another server\'s tool is not callable here');
    } finally {
      await client.close();
    }
  }));
