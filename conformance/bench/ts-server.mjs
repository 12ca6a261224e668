// Baseline for the benchmark: a minimal stateless Streamable HTTP MCP server built with the
// official TypeScript SDK (low-level `Server` + `StreamableHTTPServerTransport`,
// `sessionIdGenerator: undefined`, `enableJsonResponse: true`, one server+transport per request
// as the SDK requires in stateless mode).
//
// It publishes helix's six run tools verbatim (the exact tool objects helix's tools/list
// returned, read from --tools) and answers helix_run_inspect from a fixed in-memory run object
// (the run helix itself returned, read from --run). It verifies no JWT and touches no store:
// it is the floor of what an MCP server on this SDK costs per request.
//
//   node ts-server.mjs --port 18081 --tools tools.json --run run.json
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    tools: { type: 'string' },
    run: { type: 'string' },
  },
});
if (!values.port || !values.tools || !values.run) {
  console.error('usage: ts-server.mjs --port P --tools tools.json --run run.json');
  process.exit(2);
}
if (!['127.0.0.1', 'localhost', '::1'].includes(values.host)) {
  console.error('ts-server binds loopback only');
  process.exit(2);
}

const tools = JSON.parse(readFileSync(values.tools, 'utf8'));
const run = JSON.parse(readFileSync(values.run, 'utf8'));
const names = new Set(tools.map((t) => t.name));
const inspectResult = { content: [{ type: 'text', text: JSON.stringify(run) }], structuredContent: run };
const notHere = (code, message) => ({
  content: [{ type: 'text', text: message }],
  isError: true,
  structuredContent: {
    schema: 'helix.agent_api.error.v1',
    error: { code, message, retryable: false, details: {} },
    request_id: 'req_bench',
  },
});

function mcpServer() {
  const server = new Server({ name: 'bench-ts-sdk', version: '0.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const { name, arguments: args } = req.params;
    if (!names.has(name)) return notHere('not_found', `unknown tool ${name}`);
    if (name !== 'helix_run_inspect') return notHere('invalid_request', `${name} is not served by the bench baseline`);
    if (args?.run_id !== run.run_id) return notHere('not_found', 'unknown run');
    return inspectResult;
  });
  return server;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > 1 << 20) reject(new Error('body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const http = createServer(async (req, res) => {
  try {
    const path = new URL(req.url, 'http://x').pathname;
    if (path !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { Allow: 'POST' }).end();
      return;
    }
    if (!/^Bearer \S+$/.test(req.headers.authorization ?? '')) {
      res.writeHead(401, { 'WWW-Authenticate': 'Bearer' }).end();
      return;
    }
    const body = JSON.parse((await readBody(req)).toString('utf8'));
    const server = mcpServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (e) {
    if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: String(e?.message ?? e) } }));
  }
});
http.keepAliveTimeout = 30_000;
http.listen(Number(values.port), values.host, () => {
  console.log(`bench ts-sdk server listening on http://${values.host}:${values.port}/mcp (${tools.length} tools)`);
});
const stop = () => http.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
