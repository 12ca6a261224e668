// MCP Apps (extension io.modelcontextprotocol/ui) through the official TypeScript SDK: a
// client declaring the extension in its capabilities sees _meta.ui.resourceUri on the five
// run tools and reads the ui:// view; a client that does not sees today's catalog.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { withHelix } from '../lib/helix-server.mjs';

const EXTENSION = 'io.modelcontextprotocol/ui';
const MIME = 'text/html;profile=mcp-app';
const VIEW_URI = 'ui://helix/run-view.html';
const VIEW_TOOLS = ['helix_run_start', 'helix_run_continue', 'helix_run_inspect', 'helix_run_fetch_evidence', 'helix_run_list_events'];

async function open(helix, capabilities) {
  const client = new Client({ name: 'helix-conformance-node-apps', version: '0.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(helix.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${helix.tokens.full}` } },
  });
  await client.connect(transport);
  return { client, transport };
}

test('a client declaring MCP Apps gets the run view; one that does not sees today\'s catalog', () => withHelix(async (helix) => {
  const declared = await open(helix, { extensions: { [EXTENSION]: { mimeTypes: [MIME] } } });
  let withUi;
  try {
    const { client, transport } = declared;
    assert.deepEqual(client.getServerCapabilities().extensions?.[EXTENSION], { mimeTypes: [MIME] });
    assert.ok(client.getServerCapabilities().resources, 'resources advertised with the extension');
    assert.ok(transport.sessionId?.startsWith('helix-apps-'), `session id ${transport.sessionId}`);
    withUi = (await client.listTools()).tools;
    for (const tool of withUi) {
      const want = VIEW_TOOLS.includes(tool.name) ? { resourceUri: VIEW_URI } : undefined;
      assert.deepEqual(tool._meta?.ui, want, `${tool.name} _meta.ui`);
    }
    const { resources } = await client.listResources();
    assert.deepEqual(resources.map((r) => [r.uri, r.mimeType]), [[VIEW_URI, MIME]]);
    const { contents } = await client.readResource({ uri: VIEW_URI });
    assert.equal(contents.length, 1);
    assert.equal(contents[0].mimeType, MIME);
    assert.ok(contents[0].text.startsWith('<!DOCTYPE html>'));
    assert.doesNotMatch(contents[0].text, /https?:\/\//, 'no external origin in the view');
    assert.deepEqual(contents[0]._meta?.ui?.csp, { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] });
  } finally {
    await declared.client.close();
  }

  const plain = await open(helix, {});
  try {
    const { client, transport } = plain;
    // No MCP Apps extension; the server's other extensions (Tasks) are declared to everyone.
    assert.equal(client.getServerCapabilities().extensions?.[EXTENSION], undefined);
    assert.deepEqual(Object.keys(client.getServerCapabilities().extensions ?? {}), ['io.modelcontextprotocol/tasks']);
    assert.equal(client.getServerCapabilities().resources, undefined);
    assert.equal(transport.sessionId, undefined, 'no session id without the extension');
    const tools = (await client.listTools()).tools;
    const stripped = withUi.map((t) => {
      const copy = structuredClone(t);
      delete copy._meta.ui;
      return copy;
    });
    assert.deepEqual(tools, stripped, 'the catalog differs from today\'s beyond _meta.ui');
    await assert.rejects(client.listResources(), (e) => e.code === -32601);
    await assert.rejects(client.readResource({ uri: VIEW_URI }), (e) => e.code === -32601);
  } finally {
    await plain.client.close();
  }
}));
