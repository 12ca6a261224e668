// Bench setup against a running `helix serve`: read helix's tool catalog verbatim
// (raw tools/list, so no SDK strips fields), start one run, inspect it, and write
// tools.json / run.json for the TypeScript baseline server.
//
//   node prepare.mjs --helix http://127.0.0.1:P/mcp --token T --out DIR
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { PROTOCOL_VERSION, loopbackUrl, rpc } from './lib.mjs';

const RUN_TOOLS = ['helix_run_start', 'helix_run_continue', 'helix_run_cancel', 'helix_run_inspect',
  'helix_run_fetch_evidence', 'helix_run_list_events'];

const { values } = parseArgs({ options: { helix: { type: 'string' }, token: { type: 'string' }, out: { type: 'string' } } });
if (!values.helix || !values.token || !values.out) {
  console.error('usage: prepare.mjs --helix URL --token T --out DIR');
  process.exit(2);
}
const url = loopbackUrl(values.helix);
const token = values.token;

const init = await rpc(url, token, 'initialize', {
  protocolVersion: PROTOCOL_VERSION,
  capabilities: {},
  clientInfo: { name: 'helix-bench-prepare', version: '0.0.0' },
});
const { tools } = await rpc(url, token, 'tools/list', {}, 2);
const names = tools.map((t) => t.name);
for (const n of RUN_TOOLS) if (!names.includes(n)) throw new Error(`helix tools/list lacks ${n}: ${names}`);
const extra = names.filter((n) => !RUN_TOOLS.includes(n));
if (extra.length) console.error(`note: helix lists ${extra.length} more tools (${extra.join(', ')}); mirrored verbatim too`);

const started = await rpc(url, token, 'tools/call', {
  name: 'helix_run_start',
  arguments: {
    idempotency_key: `bench-${randomUUID()}`,
    request: {
      objective: 'Summarize the measured Casimir force between parallel plates (Lamoreaux 1997).',
      constraints: [],
      database_scope: ['research_library'],
      budget: { max_steps: 4, expires_in_seconds: 3600 },
    },
  },
}, 3);
if (started.isError) throw new Error(`helix_run_start failed: ${JSON.stringify(started.structuredContent)}`);
const runId = started.structuredContent.run_id;
const inspected = await rpc(url, token, 'tools/call', { name: 'helix_run_inspect', arguments: { run_id: runId } }, 4);
if (inspected.isError) throw new Error(`helix_run_inspect failed: ${JSON.stringify(inspected.structuredContent)}`);

writeFileSync(join(values.out, 'tools.json'), JSON.stringify(tools));
writeFileSync(join(values.out, 'run.json'), JSON.stringify(inspected.structuredContent));
writeFileSync(join(values.out, 'run_id'), runId);
console.error(`helix ${init.serverInfo?.name ?? '?'} ${init.serverInfo?.version ?? ''} protocol ${init.protocolVersion}; ` +
  `${tools.length} tools; run ${runId}`);
