// The reference for MCP error answers: a stateless Streamable HTTP server built with the
// official TypeScript SDK's high-level `McpServer` (one server and transport per request,
// `sessionIdGenerator: undefined`, `enableJsonResponse: true`, as the SDK's stateless
// example does). It registers helix's own tools (the objects helix's `tools/list` returned)
// with input schemas converted by zod's `fromJSONSchema`, so the SDK validates the same
// arguments against the same schemas. A call that passes validation answers a fixed result:
// only error answers are compared (test/error-answers.test.mjs).
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { fromJSONSchema } from 'zod';

function mcpServer(tools) {
  const server = new McpServer({ name: 'ts-sdk-reference', version: '0.0.0' }, { capabilities: { tools: {} } });
  for (const tool of tools) {
    server.registerTool(
      tool.name,
      { description: tool.description, inputSchema: fromJSONSchema(tool.inputSchema) },
      async () => ({ content: [{ type: 'text', text: 'reference server: arguments accepted' }] }),
    );
  }
  return server;
}

/** Starts the reference server on a loopback port; resolves to `{ url, close() }`. */
export function startReference(tools) {
  const http = createServer(async (req, res) => {
    try {
      // The transport reads and parses the body itself (its parse errors included).
      const server = mcpServer(tools);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        transport.close();
        server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: String(e?.message ?? e) } }));
    }
  });
  return new Promise((resolve, reject) => {
    http.on('error', reject);
    http.listen(0, '127.0.0.1', () => {
      const { port } = http.address();
      resolve({ url: `http://127.0.0.1:${port}/mcp`, close: () => new Promise((r) => http.close(() => r())) });
    });
  });
}
