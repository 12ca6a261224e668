// MCP client helpers on top of the official TypeScript SDK.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const RUN_TOOLS = [
  'helix_run_start',
  'helix_run_continue',
  'helix_run_cancel',
  'helix_run_inspect',
  'helix_run_fetch_evidence',
  'helix_run_list_events',
];

// docs/wire.md, "MCP tools".
export const TOOL_SCOPE = {
  helix_run_start: 'helix.agent_runs.write',
  helix_run_continue: 'helix.agent_runs.write',
  helix_run_cancel: 'helix.agent_runs.write',
  helix_run_inspect: 'helix.agent_runs.read',
  helix_run_fetch_evidence: 'helix.agent_runs.read',
  helix_run_list_events: 'helix.agent_runs.read',
};
export const TOOL_ARGS = {
  helix_run_start: ['idempotency_key', 'request'],
  helix_run_continue: ['run_id', 'idempotency_key', 'request'],
  helix_run_cancel: ['run_id', 'idempotency_key', 'request'],
  helix_run_inspect: ['run_id'],
  helix_run_fetch_evidence: ['run_id'],
  helix_run_list_events: ['run_id', 'after_seq', 'limit'],
};
export const OPTIONAL_ARGS = new Set(['after_seq', 'limit']);

export const FALSE_FLAGS = ['answer_authority', 'assistant_answer', 'terminal_eligible', 'raw_content_included'];
const TERMINAL_COMPLETION = new Set(['completed', 'failed', 'budget_exhausted', 'cancelled']);
const TERMINAL_LIFECYCLE = new Set(['completed', 'failed', 'cancelled']);

export const COVERED_OBJECTIVE =
  'Summarize the measured Casimir force between parallel plates, including the Lamoreaux 1997 torsion ' +
  'pendulum measurement and the sphere-plate geometry with the proximity force approximation.';
export const UNCOVERED_OBJECTIVE = 'List the opening hours of the municipal swimming pool in a fictional town.';

const CALL_TIMEOUT_MS = 180_000;

export const key = (prefix) => `conf-node-${prefix}-${randomUUID()}`;

export function startRequest(objective = COVERED_OBJECTIVE, maxSteps = 8, contract = undefined) {
  return {
    objective,
    constraints: ['Use only the research library.'],
    database_scope: ['research_library'],
    ...(contract ? { completion_contract: contract } : {}),
    budget: { max_steps: maxSteps, expires_in_seconds: 3600 },
  };
}

// A contract the sample corpus cannot satisfy in one turn (200 is the documented maximum):
// the run stays continuable, so a stale expected_version can be tested on a live run.
export const UNSATISFIABLE_CONTRACT = { min_evidence_refs: 200 };

/**
 * Connect (initialize) with the SDK's Streamable HTTP transport, bearer in requestInit headers,
 * and list tools once, as a real host does (this also arms the SDK's outputSchema validation).
 * `wire` collects the raw JSON-RPC bodies the SDK received: the SDK's zod Tool schema drops
 * fields it does not know (such as the standard `securitySchemes` tool field).
 */
export async function connect(url, token, { listTools = true } = {}) {
  const wire = [];
  const recordingFetch = async (input, init) => {
    const res = await fetch(input, init);
    const ctype = res.headers.get('content-type') ?? '';
    if ((init?.method ?? 'GET') === 'POST' && ctype.startsWith('application/json')) {
      try {
        wire.push(await res.clone().json());
      } catch { /* not JSON */ }
    }
    return res;
  };
  const client = new Client({ name: 'helix-conformance-node', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: recordingFetch,
  });
  await client.connect(transport);
  assert.ok(client.getServerVersion(), 'initialize returned no serverInfo');
  const tools = listTools ? (await client.listTools()).tools : null;
  return { client, wire, tools };
}

export async function call(client, name, args) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
}

export async function callOk(client, name, args) {
  const result = await call(client, name, args);
  const sc = result.structuredContent;
  assert.ok(!result.isError, `${name} returned isError: ${JSON.stringify(sc, null, 1)}`);
  assert.equal(typeof sc, 'object', `${name}: no structuredContent`);
  const text = (result.content ?? []).find((c) => c.type === 'text');
  assert.ok(text, `${name}: no text content block`);
  assert.deepEqual(JSON.parse(text.text), sc, `${name}: text content JSON differs from structuredContent`);
  return sc;
}

export async function callErr(client, name, args) {
  const result = await call(client, name, args);
  const sc = result.structuredContent;
  assert.equal(result.isError, true, `${name}: expected isError, got success: ${JSON.stringify(sc, null, 1)}`);
  assert.equal(sc?.schema, 'helix.agent_api.error.v1', `error envelope schema: ${JSON.stringify(sc)}`);
  assert.equal(typeof sc.error?.code, 'string', `no error.code in ${JSON.stringify(sc)}`);
  return { error: sc.error, result };
}

export function assertFalseFlags(obj, what) {
  for (const flag of FALSE_FLAGS) {
    assert.ok(flag in obj, `${what}: flag ${flag} missing`);
    assert.equal(obj[flag], false, `${what}: ${flag} expected false, got ${JSON.stringify(obj[flag])}`);
  }
}

export function assertRun(run) {
  assert.equal(run.schema, 'helix.agent_run.v1', `run schema: ${run.schema}`);
  for (const f of ['run_id', 'version', 'lifecycle_status', 'completion_status', 'terminal_authority_status',
    'pending_questions', 'recommended_next_action']) {
    assert.ok(f in run, `run field ${f} missing: ${Object.keys(run).sort()}`);
  }
  assert.ok(Number.isInteger(run.version) && run.version >= 1, `version ${run.version}`);
  assert.ok(['continue', 'answer_questions', 'wait', 'stop'].includes(run.recommended_next_action), run.recommended_next_action);
  assertFalseFlags(run, `run ${run.run_id} v${run.version}`);
}

export const isTerminal = (run) =>
  TERMINAL_COMPLETION.has(run.completion_status) || TERMINAL_LIFECYCLE.has(run.lifecycle_status);

export function continueRequest(run) {
  const answers = run.completion_status === 'needs_input'
    ? (run.pending_questions ?? []).map((q) => ({ question_id: q.question_id, value: 'Use the research library sources; SI units.' }))
    : [];
  return {
    expected_version: run.version,
    instruction: 'Gather evidence from the research library and complete the objective.',
    answers,
  };
}

export async function listAllEvents(client, runId) {
  const events = [];
  let after = 0;
  for (let i = 0; i < 100; i++) {
    const page = await callOk(client, 'helix_run_list_events', { run_id: runId, after_seq: after, limit: 200 });
    assert.equal(page.schema, 'helix.agent_run.event_page.v1');
    assert.equal(page.run_id, runId);
    events.push(...page.events);
    if (!page.has_more) break;
    assert.ok(page.next_after_seq > after, 'event paging does not advance');
    after = page.next_after_seq;
  }
  return events;
}

export function securityScopes(schemes) {
  assert.ok(Array.isArray(schemes) && schemes.length > 0, `securitySchemes is not a non-empty list: ${JSON.stringify(schemes)}`);
  const scopes = [];
  for (const s of schemes) {
    assert.equal(typeof s, 'object', `security scheme is not an object: ${JSON.stringify(s)}`);
    if (s.type === 'oauth2') scopes.push(...(s.scopes ?? []));
  }
  assert.ok(scopes.length > 0, `no oauth2 scheme with scopes in ${JSON.stringify(schemes)}`);
  return scopes;
}

/**
 * A stand-in Helix Ask endpoint (docs/turn-contract.md) that answers each turn after
 * `delayMs` with one research_library evidence item and no terminal candidate, so a
 * turn stays live long enough to be observed. Resolves to { url, turns, close() }.
 */
export function slowHelixAsk(delayMs) {
  const turns = [];
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let step = 0;
      try {
        step = JSON.parse(body).step;
      } catch { /* answered anyway */ }
      turns.push(step);
      setTimeout(() => {
        const artifact = {
          solver_status: 'partial',
          summary: `step ${step}: one passage`,
          satisfied_evidence_families: ['research_library_evidence'],
          evidence: [{
            ref: `evidence:conformance:${step}`, family: 'research_library_evidence',
            source: 'research-library://casimir.md#p1', content_sha256: '0'.repeat(64), excerpt: 'a passage',
          }],
        };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ schema: 'helix.turn_artifact.v1', artifact }));
      }, delayMs);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `http://127.0.0.1:${port}/turns`,
        turns,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}
