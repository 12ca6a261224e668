// Closed-loop load generator for MCP over Streamable HTTP (loopback only, bounded).
//
// For each operation (tools/list, tools/call helix_run_inspect) and each target, it warms
// up, then keeps `concurrency` keep-alive connections busy for `duration` seconds (and at
// most `max-requests` requests), each a JSON-RPC POST with the headers a Streamable HTTP
// client sends. A response counts only if it is HTTP 200 with a JSON-RPC `result` (and,
// for tools/call, `isError` not true). Prints requests/s, p50/p99 latency and helix/ts.
//
//   node load.mjs --target helix=http://127.0.0.1:A/mcp --target ts=http://127.0.0.1:B/mcp \
//     --token T --run-id R [--concurrency 16] [--duration 10] [--warmup 1] [--json out.json]
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { loopbackUrl, post } from './lib.mjs';

const { values } = parseArgs({
  options: {
    target: { type: 'string', multiple: true },
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

function verdict(op, res) {
  if (res.status !== 200) return `HTTP ${res.status}`;
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
        res = await post(target.url, agent, token, op.body, 10_000);
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

const rows = [];
for (const op of OPS) {
  for (const target of targets) {
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
const [a, b] = targets.map((t) => t.name);
if (a && b) {
  console.log('');
  for (const op of OPS) {
    const ra = rows.find((r) => r.target === a && r.operation === op.name);
    const rb = rows.find((r) => r.target === b && r.operation === op.name);
    const ratio = ra.requests && rb.requests ? ra.rps / rb.rps : NaN;
    ratios[op.name] = ratio;
    console.log(`ratio ${a}/${b} ${op.name}: ${fmt(ratio, 2)}x requests/s`);
  }
}
for (const r of rows) {
  if (r.errors) console.log(`warning: ${r.target} ${r.operation}: ${r.errors} failed responses ${JSON.stringify(r.error_kinds)}`);
}
if (values.json) {
  writeFileSync(values.json, JSON.stringify({ concurrency, duration_s: durationMs / 1000, warmup_s: warmupMs / 1000, rows, ratios }, null, 2));
}
process.exit(rows.some((r) => r.requests === 0) ? 1 : 0);
