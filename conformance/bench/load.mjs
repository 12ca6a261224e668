// Closed-loop load generator for MCP over Streamable HTTP (loopback only, bounded).
//
// For each operation (tools/list, tools/call helix_run_inspect) and each target, it warms
// up, then keeps `concurrency` keep-alive connections busy for `duration` seconds (and at
// most `max-requests` requests), each a JSON-RPC POST with the headers a Streamable HTTP
// client sends. A response counts only if it is HTTP 200 with a JSON-RPC `result` (and,
// for tools/call, `isError` not true). With `--rest BASE` it also measures the same
// inspect over helix's REST facade (GET BASE/api/v1/agent-runs/R, 200 with the run).
// Prints requests/s, p50/p99 latency, helix's ratio to every other target, and, when the
// targets are there, the issue-11 ratios: the tool call against the bare rmcp floor
// (target >= 0.65) and its cost against REST inspect (target <= 1.25).
//
//   node load.mjs --target helix=http://127.0.0.1:A/mcp --target floor=http://127.0.0.1:B/mcp \
//     --target ts=http://127.0.0.1:C/mcp --rest http://127.0.0.1:A --token T --run-id R \
//     [--concurrency 16] [--duration 10] [--warmup 1] [--json out.json]
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { get, loopbackUrl, post } from './lib.mjs';

const { values } = parseArgs({
  options: {
    target: { type: 'string', multiple: true },
    rest: { type: 'string' },
    token: { type: 'string' },
    'run-id': { type: 'string' },
    concurrency: { type: 'string', default: '16' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '1' },
    'max-requests': { type: 'string', default: '2000000' },
    json: { type: 'string' },
  },
});
if (!values.target?.length || !values.token || !values['run-id']) {
  console.error('usage: load.mjs --target name=url [--target ...] --token T --run-id R');
  process.exit(2);
}
const targets = values.target.map((t) => {
  const i = t.indexOf('=');
  return { name: t.slice(0, i), url: loopbackUrl(t.slice(i + 1)) };
});
const concurrency = Math.max(1, Math.min(256, Number(values.concurrency)));
const durationMs = Math.max(1, Math.min(120, Number(values.duration))) * 1000;
const warmupMs = Math.max(0, Math.min(30, Number(values.warmup))) * 1000;
const maxRequests = Math.max(1, Number(values['max-requests']));
const token = values.token;

const OPS = [
  {
    name: 'tools/list',
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    check: (r) => Array.isArray(r.tools) && r.tools.length > 0,
  },
  {
    name: 'tools/call inspect',
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'helix_run_inspect', arguments: { run_id: values['run-id'] } },
    }),
    check: (r) => r.isError !== true && r.structuredContent?.run_id === values['run-id'],
  },
];
const REST_INSPECT = {
  name: 'REST inspect',
  rest: true,
  check: (body) => body.run_id === values['run-id'],
};

function verdict(op, res) {
  if (res.status !== 200) return `HTTP ${res.status}`;
  if (op.rest) {
    try {
      return op.check(JSON.parse(res.body.toString('utf8'))) ? null : 'unexpected run';
    } catch {
      return 'non-JSON body';
    }
  }
  let msg;
  try {
    msg = JSON.parse(res.body.toString('utf8'));
  } catch {
    return 'non-JSON body';
  }
  if (msg.error) return `JSON-RPC ${msg.error.code}`;
  if (!msg.result) return 'no result';
  if (!op.check(msg.result)) return msg.result.isError ? `isError ${msg.result.structuredContent?.error?.code}` : 'unexpected result';
  return null;
}

async function drive(target, op, ms, record) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const stats = { ok: 0, errors: 0, bytes: 0, lat: [], errorKinds: new Map() };
  const deadline = performance.now() + ms;
  let issued = 0;
  const worker = async () => {
    while (performance.now() < deadline && issued < maxRequests) {
      issued++;
      const t0 = performance.now();
      let bad;
      let res;
      try {
        res = op.rest ? await get(target.url, agent, token, 10_000) : await post(target.url, agent, token, op.body, 10_000);
        bad = verdict(op, res);
      } catch (e) {
        bad = e?.code ?? String(e?.message ?? e);
      }
      const dt = performance.now() - t0;
      if (bad === null) {
        stats.ok++;
        stats.bytes += res.body.length;
        if (record) stats.lat.push(dt);
      } else {
        stats.errors++;
        stats.errorKinds.set(bad, (stats.errorKinds.get(bad) ?? 0) + 1);
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  stats.seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  return stats;
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);

const cases = OPS.flatMap((op) => targets.map((target) => ({ target, op })));
if (values.rest) {
  const base = loopbackUrl(values.rest);
  const url = new URL(`/api/v1/agent-runs/${encodeURIComponent(values['run-id'])}`, base);
  cases.push({ target: { name: targets[0].name, url }, op: REST_INSPECT });
}

const rows = [];
for (const { target, op } of cases) {
  if (warmupMs > 0) await drive(target, op, warmupMs, false);
  const s = await drive(target, op, durationMs, true);
  s.lat.sort((a, b) => a - b);
  const row = {
    target: target.name,
    operation: op.name,
    requests: s.ok,
    errors: s.errors,
    rps: s.ok / s.seconds,
    p50_ms: pct(s.lat, 50),
    p99_ms: pct(s.lat, 99),
    mean_bytes: s.ok ? Math.round(s.bytes / s.ok) : 0,
    error_kinds: Object.fromEntries(s.errorKinds),
  };
  rows.push(row);
  console.error(`  ${row.target} ${row.operation}: ${row.rps.toFixed(0)} req/s, ${row.errors} errors`);
}

const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const header = ['target', 'operation', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'resp bytes'];
const table = rows.map((r) => [r.target, r.operation, String(r.requests), String(r.errors), fmt(r.rps),
  fmt(r.p50_ms, 2), fmt(r.p99_ms, 2), String(r.mean_bytes)]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t[i].length)));
const line = (cells) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
console.log(`\nMCP load: concurrency ${concurrency}, ${durationMs / 1000} s per target and operation (after ${warmupMs / 1000} s warm-up), loopback`);
console.log(line(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const t of table) console.log(line(t));

const ratios = {};
const rps = (target, operation) => {
  const r = rows.find((x) => x.target === target && x.operation === operation);
  return r && r.requests ? r.rps : NaN;
};
const [a, ...others] = targets.map((t) => t.name);
console.log('');
for (const b of others) {
  for (const op of OPS) {
    const ratio = rps(a, op.name) / rps(b, op.name);
    ratios[`${a}/${b} ${op.name}`] = ratio;
    console.log(`ratio ${a}/${b} ${op.name}: ${fmt(ratio, 2)}x requests/s`);
  }
}
const CALL = 'tools/call inspect';
if (others.includes('floor')) {
  const ratio = rps(a, CALL) / rps('floor', CALL);
  ratios['call/floor'] = ratio;
  console.log(`${a} ${CALL} at ${fmt(ratio, 2)} of the rmcp floor's requests/s (issue 11 target: >= 0.65)`);
}
if (values.rest) {
  // Cost per request is 1/throughput: the call's cost relative to REST's.
  const ratio = rps(a, REST_INSPECT.name) / rps(a, CALL);
  ratios['call cost/REST cost'] = ratio;
  console.log(`${a} ${CALL} costs ${fmt(ratio, 2)}x ${REST_INSPECT.name} per request (issue 11 target: <= 1.25)`);
}
for (const r of rows) {
  if (r.errors) console.log(`warning: ${r.target} ${r.operation}: ${r.errors} failed responses ${JSON.stringify(r.error_kinds)}`);
}
if (values.json) {
  writeFileSync(values.json, JSON.stringify({ concurrency, duration_s: durationMs / 1000, warmup_s: warmupMs / 1000, rows, ratios }, null, 2));
}
process.exit(rows.some((r) => r.requests === 0) ? 1 : 0);
