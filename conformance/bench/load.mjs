// Closed-loop load generator for MCP over Streamable HTTP (loopback only, bounded).
//
// For each operation (tools/list, tools/call helix_run_inspect) and each target, it warms
// up, then keeps `concurrency` keep-alive connections busy for `duration` seconds (and at
// most `max-requests` requests), each a JSON-RPC POST with the headers a Streamable HTTP
// client sends. A response counts only if it is HTTP 200 with a JSON-RPC `result` (and,
// for tools/call, `isError` not true). With `--rest BASE` it also measures the same
// inspect over helix's REST facade (GET BASE/api/v1/agent-runs/R, 200 with the run), and
// with `--rest-floor BASE` the same GET against the floor's bare axum handler, which reads
// the same run item from a copy of the same embedded store.
// Prints requests/s, p50/p99 latency, helix's ratio to every other target, and, when the
// targets are there, the issue-11 ratios: the tool call against the bare rmcp floor
// (target >= 0.85), its cost against REST inspect (target <= 1.25), REST inspect against the call
// (>= 1.0) and against the bare axum store read (>= 0.8).
//
// Load generator (--loadgen): `wrk` (the C load generator, through wrk.lua; one thread by
// default, --wrk-threads) or `node` (this process). `auto` (default) takes wrk when it is
// on PATH: on a small machine the Node generator spends as much CPU per request as a fast
// server does and caps what it can measure (the bare rmcp floor most of all). With wrk,
// this process only waits while each case runs. Every case of one run uses the same
// generator, so the ratios compare like with like.
//
//   node load.mjs --target helix=http://127.0.0.1:A/mcp --target floor=http://127.0.0.1:B/mcp \
//     --target ts=http://127.0.0.1:C/mcp --rest http://127.0.0.1:A --token T --run-id R \
//     [--concurrency 16] [--duration 10] [--warmup 1] [--loadgen auto|wrk|node] [--json out.json]
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { get, loopbackUrl, post } from './lib.mjs';

const { values } = parseArgs({
  options: {
    target: { type: 'string', multiple: true },
    rest: { type: 'string' },
    'rest-floor': { type: 'string' },
    token: { type: 'string' },
    'run-id': { type: 'string' },
    concurrency: { type: 'string', default: '16' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '1' },
    'max-requests': { type: 'string', default: '2000000' },
    loadgen: { type: 'string', default: 'auto' },
    'wrk-threads': { type: 'string', default: '1' },
    json: { type: 'string' },
    pid: { type: 'string', multiple: true },
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
const hasWrk = () => spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
const loadgen = values.loadgen === 'auto' ? (hasWrk() ? 'wrk' : 'node') : values.loadgen;
if (!['wrk', 'node'].includes(loadgen)) {
  console.error(`unknown --loadgen ${values.loadgen} (auto, wrk or node)`);
  process.exit(2);
}
const wrkThreads = Math.max(1, Math.min(concurrency, Number(values['wrk-threads'])));
const WRK_SCRIPT = fileURLToPath(new URL('./wrk.lua', import.meta.url));

// Server CPU per request (--pid name=PID, Linux /proc): user+system time the target's
// process spent during a case, divided by its good responses. On a shared machine this
// moves far less than requests/s, which also depends on what else gets the cores.
const pids = new Map((values.pid ?? []).map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;
function cpuSeconds(name) {
  const pid = pids.get(name);
  if (!pid) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return NaN;
  }
}

const OPS = [
  {
    name: 'tools/list',
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    check: (r) => Array.isArray(r.tools) && r.tools.length > 0,
    expect: '"tools":[{',
  },
  {
    name: 'tools/call inspect',
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'helix_run_inspect', arguments: { run_id: values['run-id'] } },
    }),
    check: (r) => r.isError !== true && r.structuredContent?.run_id === values['run-id'],
    expect: `"run_id":"${values['run-id']}"`,
    refuse: '"isError":true',
  },
];
const REST_INSPECT = {
  name: 'REST inspect',
  rest: true,
  check: (body) => body.run_id === values['run-id'],
  expect: `"run_id":"${values['run-id']}"`,
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

/** One case under wrk (wrk.lua): the same counts as `drive`, from wrk's own summary. */
function driveWrk(target, op, ms) {
  const env = {
    ...process.env,
    BENCH_METHOD: op.rest ? 'GET' : 'POST',
    BENCH_BODY: op.rest ? '' : op.body,
    BENCH_TOKEN: token,
    BENCH_EXPECT: op.expect,
    BENCH_REFUSE: op.refuse ?? '',
  };
  const seconds = Math.max(1, Math.round(ms / 1000));
  const args = ['-t', String(wrkThreads), '-c', String(concurrency), '-d', `${seconds}s`, '--timeout', '10s',
    '-s', WRK_SCRIPT, target.url.href];
  const r = spawnSync('wrk', args, { env, encoding: 'utf8', timeout: (seconds + 30) * 1000 });
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('WRK_RESULT '));
  if (r.status !== 0 || !line) throw new Error(`wrk failed (${r.status}): ${r.stderr || r.stdout}`);
  const [requests, good, us, bytes, p50, p99, socketErrors] = line.split(' ').slice(1).map(Number);
  const bad = requests - good;
  const errorKinds = new Map();
  if (bad) errorKinds.set('bad response', bad);
  if (socketErrors) errorKinds.set('socket', socketErrors);
  return { ok: good, errors: bad + socketErrors, bytes: good ? (bytes * good) / requests : 0, seconds: us / 1e6,
    p50_ms: p50 / 1000, p99_ms: p99 / 1000, errorKinds };
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);

const cases = OPS.flatMap((op) => targets.map((target) => ({ target, op })));
if (values.rest) {
  const base = loopbackUrl(values.rest);
  const url = new URL(`/api/v1/agent-runs/${encodeURIComponent(values['run-id'])}`, base);
  cases.push({ target: { name: targets[0].name, url }, op: REST_INSPECT });
}
if (values['rest-floor']) {
  const url = new URL(`/api/v1/agent-runs/${encodeURIComponent(values['run-id'])}`, loopbackUrl(values['rest-floor']));
  cases.push({ target: { name: 'floor', url }, op: REST_INSPECT });
}

const rows = [];
for (const { target, op } of cases) {
  let s;
  let cpu0;
  if (loadgen === 'wrk') {
    if (warmupMs > 0) driveWrk(target, op, warmupMs);
    cpu0 = cpuSeconds(target.name);
    s = driveWrk(target, op, durationMs);
  } else {
    if (warmupMs > 0) await drive(target, op, warmupMs, false);
    cpu0 = cpuSeconds(target.name);
    s = await drive(target, op, durationMs, true);
    s.lat.sort((a, b) => a - b);
    s.p50_ms = pct(s.lat, 50);
    s.p99_ms = pct(s.lat, 99);
  }
  const row = {
    target: target.name,
    operation: op.name,
    requests: s.ok,
    errors: s.errors,
    rps: s.ok / s.seconds,
    p50_ms: s.p50_ms,
    p99_ms: s.p99_ms,
    mean_bytes: s.ok ? Math.round(s.bytes / s.ok) : 0,
    cpu_us: s.ok ? ((cpuSeconds(target.name) - cpu0) * 1e6) / s.ok : NaN,
    error_kinds: Object.fromEntries(s.errorKinds),
  };
  rows.push(row);
  console.error(`  ${row.target} ${row.operation}: ${row.rps.toFixed(0)} req/s, ${row.errors} errors`);
}

const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
const header = ['target', 'operation', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'resp bytes', 'cpu us/req'];
const table = rows.map((r) => [r.target, r.operation, String(r.requests), String(r.errors), fmt(r.rps),
  fmt(r.p50_ms, 2), fmt(r.p99_ms, 2), String(r.mean_bytes), fmt(r.cpu_us, 1)]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t[i].length)));
const line = (cells) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
const generator = loadgen === 'wrk' ? `wrk, ${wrkThreads} thread(s)` : 'node:http';
console.log(`\nMCP load (${generator}): concurrency ${concurrency}, ${durationMs / 1000} s per target and operation (after ${warmupMs / 1000} s warm-up), loopback`);
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
  console.log(`${a} ${CALL} at ${fmt(ratio, 2)} of the rmcp floor's requests/s (target: >= 0.85)`);
}
if (values.rest) {
  // Cost per request is 1/throughput: the call's cost relative to REST's.
  const ratio = rps(a, REST_INSPECT.name) / rps(a, CALL);
  ratios['call cost/REST cost'] = ratio;
  console.log(`${a} ${CALL} costs ${fmt(ratio, 2)}x ${REST_INSPECT.name} per request (target: <= 1.25)`);
  const cpu = (target, operation) => rows.find((x) => x.target === target && x.operation === operation)?.cpu_us ?? NaN;
  const cpuRatio = cpu(a, CALL) / cpu(a, REST_INSPECT.name);
  if (Number.isFinite(cpuRatio)) {
    ratios['call cpu/REST cpu'] = cpuRatio;
    console.log(`${a} ${CALL} uses ${fmt(cpuRatio, 2)}x the server CPU of ${REST_INSPECT.name} per request`);
  }
}
if (values.rest) {
  const ratio = rps(a, REST_INSPECT.name) / rps(a, CALL);
  ratios['REST/call'] = ratio;
  console.log(`${a} ${REST_INSPECT.name} at ${fmt(ratio, 2)} of ${CALL}'s requests/s (target: >= 1.0)`);
}
if (values.rest && values['rest-floor']) {
  const ratio = rps(a, REST_INSPECT.name) / rps('floor', REST_INSPECT.name);
  ratios['REST/REST floor'] = ratio;
  console.log(`${a} ${REST_INSPECT.name} at ${fmt(ratio, 2)} of the bare axum store read's requests/s (target: >= 0.8)`);
}
if (others.includes('floor')) {
  const cpu = (target) => rows.find((x) => x.target === target && x.operation === CALL)?.cpu_us ?? NaN;
  const cpuRatio = cpu(a) / cpu('floor');
  if (Number.isFinite(cpuRatio)) {
    ratios['call cpu/floor cpu'] = cpuRatio;
    console.log(`${a} ${CALL} uses ${fmt(cpuRatio, 2)}x the server CPU of the floor's per request`);
  }
}
for (const r of rows) {
  if (r.errors) console.log(`warning: ${r.target} ${r.operation}: ${r.errors} failed responses ${JSON.stringify(r.error_kinds)}`);
}
if (values.json) {
  writeFileSync(values.json, JSON.stringify({ loadgen, wrk_threads: loadgen === 'wrk' ? wrkThreads : undefined, concurrency, duration_s: durationMs / 1000, warmup_s: warmupMs / 1000, rows, ratios }, null, 2));
}
process.exit(rows.some((r) => r.requests === 0) ? 1 : 0);
