// Helix MCP surface driven by the official TypeScript SDK (@modelcontextprotocol/sdk).
// Each test starts its own `helix serve` (fresh data dir, free port) and stops it afterwards.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withHelix } from '../lib/helix-server.mjs';
import {
  RUN_TOOLS, TOOL_SCOPE, TOOL_ARGS, OPTIONAL_ARGS, UNCOVERED_OBJECTIVE, COVERED_OBJECTIVE, UNSATISFIABLE_CONTRACT,
  connect, call, callOk, callErr, assertFalseFlags, assertRun, isTerminal, continueRequest,
  listAllEvents, securityScopes, startRequest, key, slowHelixAsk,
} from '../lib/helix-mcp.mjs';

// (a)
test('initialize and tools/list: six run tools, schemas, OAuth scopes', () => withHelix(async (helix) => {
  const { client, wire } = await connect(helix.mcpUrl, helix.tokens.full, { listTools: false });
  let firstNames;
  try {
    const { tools } = await client.listTools();
    const again = (await client.listTools()).tools;
    const names = tools.map((t) => t.name);
    firstNames = names;
    assert.deepEqual(again.map((t) => t.name), names, 'tools/list order is not stable');
    for (const name of RUN_TOOLS) assert.ok(names.includes(name), `${name} missing from tools/list: ${names}`);
    const runNames = names.filter((n) => RUN_TOOLS.includes(n));
    assert.equal(new Set(runNames).size, 6, `duplicate run tools: ${runNames}`);

    const rawLists = wire.filter((m) => m?.result && Array.isArray(m.result.tools));
    assert.ok(rawLists.length > 0, 'no raw tools/list body captured');
    const rawTools = Object.fromEntries(rawLists.at(-1).result.tools.map((t) => [t.name, t]));

    for (const tool of tools.filter((t) => RUN_TOOLS.includes(t.name))) {
      assert.equal(tool.inputSchema?.type, 'object', `${tool.name} inputSchema type`);
      const props = tool.inputSchema.properties ?? {};
      const required = tool.inputSchema.required ?? [];
      for (const arg of TOOL_ARGS[tool.name]) {
        assert.ok(arg in props, `${tool.name} inputSchema lacks property ${arg}: ${Object.keys(props)}`);
        if (!OPTIONAL_ARGS.has(arg)) assert.ok(required.includes(arg), `${tool.name} inputSchema does not require ${arg}: ${required}`);
      }
      assert.ok(tool.outputSchema, `${tool.name} has no outputSchema`);
      assert.equal(tool.outputSchema.type, 'object', `${tool.name} outputSchema type`);

      const want = TOOL_SCOPE[tool.name];
      const meta = tool._meta ?? {};
      assert.ok('securitySchemes' in meta, `${tool.name}: _meta.securitySchemes missing: ${JSON.stringify(meta)}`);
      assert.ok(securityScopes(meta.securitySchemes).includes(want),
        `${tool.name}: _meta.securitySchemes lacks ${want}: ${JSON.stringify(meta.securitySchemes)}`);
      // The standard tool field: the SDK's Tool schema strips it, so read it from the raw body.
      const standard = tool.securitySchemes ?? rawTools[tool.name]?.securitySchemes;
      assert.ok(standard !== undefined, `${tool.name}: tool field securitySchemes missing`);
      assert.ok(securityScopes(standard).includes(want), `${tool.name}: securitySchemes lacks ${want}: ${JSON.stringify(standard)}`);
    }
  } finally {
    await client.close();
  }

  // A second connection sees the same catalog order.
  const second = await connect(helix.mcpUrl, helix.tokens.full);
  try {
    assert.deepEqual(second.tools.map((t) => t.name), firstNames, 'tools/list order differs across connections');
  } finally {
    await second.client.close();
  }
}));

// (b)
test('run loop: start, continue until completed, inspect, evidence, events', () => withHelix(async (helix) => {
  const { client } = await connect(helix.mcpUrl, helix.tokens.full);
  try {
    let run = await callOk(client, 'helix_run_start', { idempotency_key: key('start'), request: startRequest() });
    assertRun(run);
    assert.equal(run.version, 1, `start version: ${run.version}`);
    const runId = run.run_id;
    const trail = [[run.version, run.lifecycle_status, run.completion_status]];

    for (let i = 0; i < 12; i++) {
      if (isTerminal(run) || run.budget.steps_remaining <= 0) break;
      const next = await callOk(client, 'helix_run_continue', {
        run_id: runId, idempotency_key: key('cont'), request: continueRequest(run),
      });
      assertRun(next);
      assert.equal(next.run_id, runId);
      assert.ok(next.version > run.version, `version did not advance: ${run.version} -> ${next.version}`);
      run = next;
      trail.push([run.version, run.lifecycle_status, run.completion_status]);
    }

    assert.equal(run.completion_status, 'completed', `loop ended at ${JSON.stringify(trail)}; last run: ${JSON.stringify(run, null, 1)}`);
    assert.equal(run.lifecycle_status, 'completed', JSON.stringify(trail));
    assert.equal(run.terminal_authority_status, 'authorized');
    assert.equal(run.recommended_next_action, 'stop');

    const inspected = await callOk(client, 'helix_run_inspect', { run_id: runId });
    assertRun(inspected);
    assert.equal(inspected.run_id, runId);
    assert.equal(inspected.version, run.version);
    assert.equal(inspected.completion_status, 'completed');
    assert.equal(inspected.terminal_authority_status, 'authorized');
    const ev = inspected.evidence;
    const nRefs = ['observation_refs', 'evidence_refs', 'receipt_refs'].reduce((n, k) => n + (ev[k]?.length ?? 0), 0);
    assert.ok(nRefs >= 1, `completed run has no evidence refs: ${JSON.stringify(ev)}`);

    const bundle = await callOk(client, 'helix_run_fetch_evidence', { run_id: runId });
    assert.ok(Object.keys(bundle).length > 0, 'empty evidence bundle');
    assertFalseFlags(bundle, 'evidence bundle');

    const events = await listAllEvents(client, runId);
    const seqs = events.map((e) => e.seq);
    assert.deepEqual(seqs, events.map((_, i) => i + 1), `event seqs not contiguous from 1: ${seqs}`);
    const kinds = events.map((e) => e.kind);
    assert.equal(kinds[0], 'run_started', String(kinds));
    assert.ok(kinds.includes('run_completed'), String(kinds));
    for (const e of events) {
      assert.equal(e.schema, 'helix.agent_run.event.v1');
      assert.equal(e.run_id, runId);
    }
  } finally {
    await client.close();
  }
}));

// (c)
test('replayed helix_run_start returns the same run at version 1', () => withHelix(async (helix) => {
  const { client } = await connect(helix.mcpUrl, helix.tokens.full);
  try {
    const args = { idempotency_key: key('replay'), request: startRequest() };
    const first = await call(client, 'helix_run_start', args);
    assert.ok(!first.isError, JSON.stringify(first.structuredContent));
    const second = await call(client, 'helix_run_start', structuredClone(args));
    assert.ok(!second.isError, JSON.stringify(second.structuredContent));
    const a = first.structuredContent;
    const b = second.structuredContent;
    assert.equal(a.version, 1);
    assert.equal(b.version, 1);
    assert.equal(b.run_id, a.run_id, `replay gave a new run: ${a.run_id} vs ${b.run_id}`);
    assert.ok(!first._meta?.['helix/idempotency_replayed'], JSON.stringify(first._meta));
    assert.equal(second._meta?.['helix/idempotency_replayed'], true,
      `replayed result _meta lacks helix/idempotency_replayed=true: ${JSON.stringify(second._meta)}`);

    // Same key, different request: idempotency_conflict (docs/wire.md).
    const { error } = await callErr(client, 'helix_run_start', {
      idempotency_key: args.idempotency_key, request: startRequest(UNCOVERED_OBJECTIVE),
    });
    assert.equal(error.code, 'idempotency_conflict', JSON.stringify(error));
  } finally {
    await client.close();
  }
}));

// (d)
test('stale expected_version on continue is a version_conflict', () => withHelix(async (helix) => {
  const { client } = await connect(helix.mcpUrl, helix.tokens.full);
  try {
    const run = await callOk(client, 'helix_run_start', { idempotency_key: key('start'), request: startRequest(COVERED_OBJECTIVE, 8, UNSATISFIABLE_CONTRACT) });
    const runId = run.run_id;
    const moved = await callOk(client, 'helix_run_continue', {
      run_id: runId, idempotency_key: key('cont'), request: continueRequest(run),
    });
    assert.ok(moved.version >= 2, `version ${moved.version}`);
    assert.ok(!isTerminal(moved),
      'precondition: with completion_contract.min_evidence_refs=200 the run must still be continuable after one ' +
      `continue; got ${moved.lifecycle_status}/${moved.completion_status}`);
    const { error } = await callErr(client, 'helix_run_continue', {
      run_id: runId, idempotency_key: key('stale'),
      request: { expected_version: 1, instruction: 'Try again.', answers: [] },
    });
    assert.equal(error.code, 'version_conflict', JSON.stringify(error));
    assert.equal(error.details?.current_version, moved.version, JSON.stringify(error));

    const after = await callOk(client, 'helix_run_inspect', { run_id: runId });
    assert.equal(after.version, moved.version, 'a rejected continue changed the run');
  } finally {
    await client.close();
  }
}));

// (e)
test('a token without helix.agent_runs.write gets insufficient_scope', () => withHelix(async (helix) => {
  const { client, tools } = await connect(helix.mcpUrl, helix.tokens.readOnly);
  try {
    const names = tools.map((t) => t.name);
    for (const name of RUN_TOOLS) assert.ok(names.includes(name), `catalog filtered for a read-only token: ${name} missing`);
    const { error, result } = await callErr(client, 'helix_run_start', { idempotency_key: key('scope'), request: startRequest() });
    assert.equal(error.code, 'insufficient_scope', JSON.stringify(error));
    assert.ok((error.details?.required_scopes ?? []).includes('helix.agent_runs.write'), `details.required_scopes: ${JSON.stringify(error)}`);
    const meta = result._meta ?? {};
    assert.ok('mcp/www_authenticate' in meta, `_meta lacks mcp/www_authenticate: ${JSON.stringify(meta)}`);
    const challenge = meta['mcp/www_authenticate'];
    const text = Array.isArray(challenge) ? challenge.join(' ') : String(challenge);
    assert.ok(text.includes('insufficient_scope'), text);
    assert.ok(text.includes('helix.agent_runs.write'), text);
  } finally {
    await client.close();
  }
}));

// (f)
test('cancel at version 1, then continue is run_not_continuable', () => withHelix(async (helix) => {
  const { client } = await connect(helix.mcpUrl, helix.tokens.full);
  try {
    const run = await callOk(client, 'helix_run_start', { idempotency_key: key('start'), request: startRequest() });
    assert.equal(run.version, 1);
    const cancelled = await callOk(client, 'helix_run_cancel', {
      run_id: run.run_id, idempotency_key: key('cancel'),
      request: { expected_version: 1, reason: 'conformance test cancels the run' },
    });
    assertRun(cancelled);
    assert.equal(cancelled.lifecycle_status, 'cancelled');
    assert.equal(cancelled.completion_status, 'cancelled');
    assert.equal(cancelled.version, 2);
    assert.ok(cancelled.cancelled_at, 'cancelled_at not set');

    const { error } = await callErr(client, 'helix_run_continue', {
      run_id: run.run_id, idempotency_key: key('cont'),
      request: { expected_version: 2, instruction: 'Keep going.', answers: [] },
    });
    assert.equal(error.code, 'run_not_continuable', JSON.stringify(error));

    const kinds = (await listAllEvents(client, run.run_id)).map((e) => e.kind);
    assert.ok(kinds.includes('run_cancelled'), String(kinds));
  } finally {
    await client.close();
  }
}));

// (g) The SDK validates every structuredContent against the tool's published outputSchema
// (isError results included). Every tool, in the states a run passes through, and an
// inspect while a turn is live (recommended_next_action "wait").
test('every tool result validates in the SDK, an inspect during a live turn included', async () => {
  const ask = await slowHelixAsk(1500);
  try {
    await withHelix(async (helix) => {
      const { client, tools } = await connect(helix.mcpUrl, helix.tokens.full);
      try {
        for (const t of tools) assert.ok(t.outputSchema, `${t.name} publishes no outputSchema: the SDK would not validate`);
        const run = await callOk(client, 'helix_run_start', { idempotency_key: key('start'), request: startRequest() });
        assertRun(run);
        const runId = run.run_id;
        const reads = async (what) => {
          assertRun(await callOk(client, 'helix_run_inspect', { run_id: runId }));
          assertFalseFlags(await callOk(client, 'helix_run_fetch_evidence', { run_id: runId }), `${what}: evidence`);
          const page = await callOk(client, 'helix_run_list_events', { run_id: runId, limit: 200 });
          assertFalseFlags(page, `${what}: event page`);
          for (const e of page.events) assertFalseFlags(e, `${what}: event ${e.seq}`);
        };
        await reads('waiting');

        // A turn in flight: the SDK validates each inspect it returns (a schema violation throws).
        const turn = callOk(client, 'helix_run_continue', {
          run_id: runId, idempotency_key: key('cont'), request: continueRequest(run),
        });
        let live = null;
        for (let i = 0; i < 100 && !live; i++) {
          const seen = await callOk(client, 'helix_run_inspect', { run_id: runId });
          if (seen.recommended_next_action === 'wait') live = seen;
          else await new Promise((r) => setTimeout(r, 20));
        }
        assert.ok(live, 'no inspect observed the live turn');
        assertRun(live);
        assert.equal(live.lifecycle_status, 'running');
        assert.equal(live.completion_status, 'pending');
        await reads('during the turn');
        const after = await turn;
        assertRun(after);
        assert.equal(after.version, 2);
        assert.ok(ask.turns.length >= 1, 'the stand-in Helix Ask endpoint saw no turn');
        await reads('after the turn');

        // Error results are validated too.
        const stale = await callErr(client, 'helix_run_continue', {
          run_id: runId, idempotency_key: key('stale'), request: { expected_version: 1, instruction: 'again' },
        });
        assert.equal(stale.error.code, 'version_conflict');
        assertFalseFlags(stale.result.structuredContent, 'error result');
        const missing = await callErr(client, 'helix_run_list_events', { run_id: 'run_00000000000000000000' });
        assert.equal(missing.error.code, 'not_found');

        const cancelled = await callOk(client, 'helix_run_cancel', {
          run_id: runId, idempotency_key: key('cancel'), request: { expected_version: after.version },
        });
        assert.equal(cancelled.completion_status, 'cancelled');
        await reads('cancelled');
      } finally {
        await client.close();
      }
    }, { HELIX_ASK_ENDPOINT: ask.url });
  } finally {
    await ask.close();
  }
});
