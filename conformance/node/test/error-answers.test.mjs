// Every MCP error answer of `helix serve` compared with the official TypeScript SDK's
// stateless server (lib/ts-reference-server.mjs: `McpServer` with helix's own tools and
// input schemas) on the same raw requests: the HTTP status, the JSON-RPC error code and
// the `id`. Where helix answers differently on purpose, the case says so and checks both
// sides, so a change of either is seen (docs/decisions.md, "MCP error answers").
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withHelix } from '../lib/helix-server.mjs';
import { startReference } from '../lib/ts-reference-server.mjs';

const ACCEPT = 'application/json, text/event-stream';

async function answer(url, token, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, authorization: `Bearer ${token}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  return {
    status: res.status,
    id: json && 'id' in json ? json.id : undefined,
    code: json?.error?.code,
    isError: json?.result?.isError === true,
    result: json?.result,
    body: json,
  };
}

const req = (id, method, params) => ({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
const call = (id, name, args) => req(id, 'tools/call', { name, arguments: args });
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
const ACTION = { room_id: `room_${'0'.repeat(20)}`, idempotency_key: 'conf-node-error-0001' };
const act = (id, action) => call(id, 'helix_minecraft_player_action', { ...ACTION, action });

// Protocol errors: status, code and id exactly as the TypeScript SDK answers them.
const SAME = [
  ['a body that is not JSON', '{"jsonrpc":'],
  ['jsonrpc 1.0', { jsonrpc: '1.0', id: 1, method: 'ping' }],
  ['a fractional id', req(1.5, 'ping')],
  ['a null id', req(null, 'ping')],
  ['an unknown envelope member', { ...req(2, 'ping'), extra: 1 }],
  ['params that are not an object', { jsonrpc: '2.0', id: 3, method: 'tools/list', params: [1] }],
  ['a JSON string', '"ping"'],
  ['a _meta that is not an object', req(4, 'tools/call', { name: 'helix_run_inspect', arguments: { run_id: 'r' }, _meta: 5 })],
  ['an unknown method', req(5, 'tools/exec')],
  ['an unknown method, string id', req('m-6', 'owner/exec')],
  ['a notification method with an id', req(7, 'notifications/initialized')],
  ['an unknown notification', { jsonrpc: '2.0', method: 'foo/bar' }],
  ['a request method without an id', { jsonrpc: '2.0', method: 'ping' }],
];

// Arguments off the published input schema: a tool result with isError (SEP-1303), the id
// kept; helix's structured content names the field and the rule.
const TOOL_RESULTS = [
  ['a missing field', call(10, 'helix_run_inspect', {}), 'run_id', 'missing'],
  ['a wrong type', call('s-11', 'helix_run_inspect', { run_id: 5 }), 'run_id', 'must be a string'],
  ['an unknown field', call(12, 'helix_run_inspect', { run_id: 'r', owner: 'x' }), 'arguments', 'unknown field (allowed: run_id)'],
  ['an unknown action type', act(13, { type: 'teleport', x: 1, y: 64, z: 1 }), 'action.type',
    'must be one of "move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait", "sequence"'],
  ['an out-of-range field', act(14, { type: 'move_to', x: 1, y: 64, z: 1, range: 9 }), 'action.range', 'must be at most 3'],
  ['an out-of-range coordinate', act(17, { type: 'look_at', x: 1, y: 4321, z: 1 }), 'action.y', 'must be at most 320'],
  ['an out-of-range tick count', act(15, { type: 'wait', ticks: 201 }), 'action.ticks', 'must be at most 200'],
  ['a nested wrong type', call(16, 'helix_run_start', { idempotency_key: 'conf-node-error-0002',
    request: { objective: 'x', budget: { max_steps: 'eight' } } }), 'request.budget.max_steps', 'must be an integer or null'],
];

// Deliberate differences: [label, body, what the TS SDK answers, what helix answers].
const DIFFERENT = [
  // The MCP spec makes an unknown tool a protocol error (-32602); the SDK's McpServer wraps
  // it in an isError result. Status and id agree.
  ['an unknown tool', call(20, 'helix_nope', {}),
    (ts) => ts.status === 200 && ts.id === 20 && ts.isError,
    (hx) => hx.status === 200 && hx.id === 20 && hx.code === -32602],
  // Malformed tools/call params: the SDK reports its zod failure as -32603 (internal
  // error); helix says -32602 (invalid params), the spec's code. Status and id agree.
  ['tools/call without params', req(21, 'tools/call'),
    (ts) => ts.status === 200 && ts.id === 21 && ts.code === -32603,
    (hx) => hx.status === 200 && hx.id === 21 && hx.code === -32602],
  ['tools/call without a name', req(22, 'tools/call', { arguments: {} }),
    (ts) => ts.status === 200 && ts.id === 22 && ts.code === -32603,
    (hx) => hx.status === 200 && hx.id === 22 && hx.code === -32602],
  ['arguments that are not an object', req(23, 'tools/call', { name: 'helix_run_inspect', arguments: [1] }),
    (ts) => ts.status === 200 && ts.id === 23 && ts.code === -32603,
    (hx) => hx.status === 200 && hx.id === 23 && hx.code === -32602],
  // Unknown fields are refused (fail closed); the SDK ignores them.
  ['an unknown tools/call params member', req(24, 'tools/call', { name: 'helix_run_inspect', arguments: { run_id: 'r' }, bogus: 1 }),
    (ts) => ts.status === 200 && ts.id === 24 && ts.result && !ts.isError,
    (hx) => hx.status === 200 && hx.id === 24 && hx.code === -32602],
  // Batches (gone since 2025-06-18) and duplicate keys are not one valid message here.
  ['a batch', [req(25, 'ping')],
    (ts) => ts.status === 200,
    (hx) => hx.status === 400 && hx.id === null && hx.code === -32700],
  ['a duplicate key', '{"jsonrpc":"2.0","id":26,"id":27,"method":"ping"}',
    (ts) => ts.status === 200 && ts.id === 27,
    (hx) => hx.status === 400 && hx.id === null && hx.code === -32700],
  // The contract's static refusals of credential-shaped values: -32600 and id null.
  ['a credential-shaped id', req(JWT, 'ping'),
    (ts) => ts.status === 200 && ts.id === JWT,
    (hx) => hx.status === 400 && hx.id === null && hx.code === -32600],
  ['a credential-shaped argument', call(28, 'helix_run_inspect', { run_id: 'sk-live-0123456789abcdef' }),
    (ts) => ts.status === 200 && ts.id === 28 && !ts.isError,
    (hx) => hx.status === 400 && hx.id === null && hx.code === -32600],
  ['a credential-shaped tool name', call(29, JWT, {}),
    (ts) => ts.status === 200 && ts.id === 29 && ts.isError,
    (hx) => hx.status === 400 && hx.id === null && hx.code === -32600],
];

test('every MCP error answer matches the TypeScript SDK stateless server, or differs as documented', () => withHelix(async (helix) => {
  const token = helix.tokens.rooms;
  const listed = await answer(helix.mcpUrl, token, req(1, 'tools/list'));
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  const reference = await startReference(listed.result.tools);
  try {
    const both = async (body) => [await answer(reference.url, token, body), await answer(helix.mcpUrl, token, body)];
    for (const [label, body] of SAME) {
      const [ts, hx] = await both(body);
      const shape = (a) => ({ status: a.status, code: a.code, id: a.id });
      assert.deepEqual(shape(hx), shape(ts), `${label}: helix ${JSON.stringify(hx.body)} / TS SDK ${JSON.stringify(ts.body)}`);
    }
    for (const [label, body, field, rule] of TOOL_RESULTS) {
      const [ts, hx] = await both(body);
      const why = `${label}: helix ${JSON.stringify(hx.body)} / TS SDK ${JSON.stringify(ts.body)}`;
      assert.ok(ts.status === 200 && ts.isError && ts.id === body.id, `the TS SDK answers a tool error: ${why}`);
      assert.ok(hx.status === 200 && hx.isError && hx.id === body.id, why);
      const error = hx.result.structuredContent.error;
      assert.equal(error.code, 'invalid_request', why);
      assert.deepEqual(error.details, { field, rule }, why);
      assert.equal(hx.result.structuredContent.schema, 'helix.agent_api.error.v1');
    }
    for (const [label, body, tsAnswers, helixAnswers] of DIFFERENT) {
      const [ts, hx] = await both(body);
      assert.ok(tsAnswers(ts), `${label}: the TS SDK's answer changed: ${ts.status} ${JSON.stringify(ts.body)}`);
      assert.ok(helixAnswers(hx), `${label}: helix answered ${hx.status} ${JSON.stringify(hx.body)}`);
    }
  } finally {
    await reference.close();
  }
}));
