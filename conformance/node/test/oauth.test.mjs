// The official TypeScript SDK's OAuth client (`authProvider` on the Streamable HTTP
// transport) against `helix serve`'s development authorization server: discovery from the
// 401 challenge, dynamic registration, the person's part in headless Chromium (the Python
// helper conformance/python/oauth_browser.py), `finishAuth`, `tools/list` and a tool call
// with the access token; without `offline_access` (this SDK never asks for it) no refresh
// token, so a refused stale token sends the SDK back to authorization.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { REPO_ROOT, SUBJECT, TENANT, withHelix } from '../lib/helix-server.mjs';
import { RUN_TOOLS, assertRun, callOk, key, startRequest } from '../lib/helix-mcp.mjs';

const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
const CHROMEDRIVER = process.env.CHROMEDRIVER_BIN ?? '/usr/bin/chromedriver';
const PYTHON = process.env.HELIX_CONFORMANCE_PYTHON ?? join(REPO_ROOT, '.venv', 'bin', 'python');
const CLIENT_NAME = 'Helix conformance (TypeScript SDK)';

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
const haveBrowser = executable(CHROMIUM) && executable(CHROMEDRIVER) && executable(PYTHON);
const skip = !haveBrowser && process.env.CI !== 'true' ? 'chromium/chromedriver or the venv python missing' : false;

/** A loopback redirect target recording each query it receives. */
async function loopback() {
  const hits = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname !== '/callback') return res.writeHead(404).end();
    hits.push(Object.fromEntries(url.searchParams));
    res.writeHead(200, { 'content-type': 'text/plain' }).end('Signed in; you may close this window.');
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { uri: `http://127.0.0.1:${server.address().port}/callback`, hits, close: () => server.close() };
}

/** The SDK's OAuthClientProvider, in memory; the redirect only records the URL. */
function memoryProvider(redirectUri) {
  const p = {
    saved: {},
    authUrls: [],
    get redirectUrl() { return redirectUri; },
    get clientMetadata() {
      return {
        client_name: CLIENT_NAME,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      };
    },
    state: () => (p.saved.state = randomBytes(16).toString('hex')),
    clientInformation: () => p.saved.client,
    saveClientInformation: (info) => { p.saved.client = info; },
    tokens: () => p.saved.tokens,
    saveTokens: (tokens) => { p.saved.tokens = tokens; },
    redirectToAuthorization: (url) => { p.authUrls.push(url); },
    saveCodeVerifier: (v) => { p.saved.verifier = v; },
    codeVerifier: () => p.saved.verifier,
  };
  return p;
}

/** The person's part: the browser walks `url` to the loopback callback (asynchronously:
 * the callback is served by this process). */
async function walk(url, until) {
  const args = [join(REPO_ROOT, 'conformance', 'python', 'oauth_browser.py'), String(url), '--until', until,
    '--subject', SUBJECT, '--tenant', TENANT, '--client-name', CLIENT_NAME];
  const env = { ...process.env, SE_OFFLINE: 'true' };
  const { stdout } = await promisify(execFile)(PYTHON, args, { encoding: 'utf8', timeout: 90_000, env });
  return JSON.parse(stdout.trim().split('\n').at(-1));
}

/** A recording fetch: every request's method, URL, form body and answer status. */
function recordingFetch(log) {
  return async (url, init = {}) => {
    const res = await fetch(url, init);
    const body = init.body instanceof URLSearchParams ? Object.fromEntries(init.body) : undefined;
    log.push({ method: init.method ?? 'GET', url: String(url), status: res.status, body });
    return res;
  };
}

async function connectWith(helix, provider, log) {
  const transport = new StreamableHTTPClientTransport(new URL(helix.mcpUrl), {
    authProvider: provider,
    fetch: recordingFetch(log),
  });
  const client = new Client({ name: 'helix-conformance-node-oauth', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport };
}

test('TypeScript SDK: OAuth sign-in through the browser, tools, a call; a stale token re-authorizes', { skip }, () =>
  withHelix(async (helix) => {
    const callback = await loopback();
    const log = [];
    try {
      const provider = memoryProvider(callback.uri);
      const transport = new StreamableHTTPClientTransport(new URL(helix.mcpUrl), {
        authProvider: provider,
        fetch: recordingFetch(log),
      });
      const first = new Client({ name: 'helix-conformance-node-oauth', version: '0.0.0' });
      await assert.rejects(first.connect(transport), UnauthorizedError, 'no token yet: the SDK must ask for authorization');
      assert.equal(log[0].status, 401, JSON.stringify(log[0]));
      assert.ok(log.some((r) => new URL(r.url).pathname.startsWith('/.well-known/oauth-protected-resource')));
      assert.ok(log.some((r) => new URL(r.url).pathname.startsWith('/.well-known/oauth-authorization-server')));
      assert.equal(log.filter((r) => r.method === 'POST' && new URL(r.url).pathname === '/register').length, 1);
      assert.ok(provider.saved.client?.client_id, 'registered');

      const [authUrl] = provider.authUrls;
      assert.equal(authUrl.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(authUrl.searchParams.get('resource'), helix.mcpUrl);
      const seen = await walk(authUrl, callback.uri);
      assert.deepEqual(seen.pages, ['sign-in', 'consent']);
      assert.ok(seen.client_shown, 'the consent page names the client');
      const [hit] = callback.hits;
      assert.equal(authUrl.searchParams.get('state'), provider.saved.state);
      assert.equal(hit.state, provider.saved.state, 'the callback echoes state');
      await transport.finishAuth(hit.code);
      const issued = provider.saved.tokens;
      assert.ok(issued?.access_token, 'an access token');
      // SDK 1.32.2 asks for the resource's scopes_supported only, never `offline_access`,
      // and the issuer gives refresh tokens only for that scope: none here.
      assert.ok(!authUrl.searchParams.get('scope').split(' ').includes('offline_access'));
      assert.equal(issued.refresh_token, undefined, 'a refresh token without offline_access');

      const { client } = await connectWith(helix, provider, log);
      try {
        const { tools } = await client.listTools();
        for (const name of RUN_TOOLS) assert.ok(tools.some((t) => t.name === name), `${name} listed`);
        const run = await callOk(client, 'helix_run_start', { idempotency_key: key('oauth'), request: startRequest() });
        assertRun(run);
      } finally {
        await client.close();
      }

      // A refused (stale) access token with nothing to refresh sends the SDK back to the
      // authorization endpoint, with the same registration.
      provider.saved.tokens = { ...issued, access_token: `${issued.access_token.slice(0, -4)}AAAA` };
      await assert.rejects(connectWith(helix, provider, log), UnauthorizedError);
      assert.equal(provider.authUrls.length, 2, 'asked to authorize again');
      assert.equal(provider.authUrls[1].searchParams.get('client_id'), provider.saved.client.client_id);
      const grants = log.filter((r) => r.body?.grant_type).map((r) => r.body.grant_type);
      assert.deepEqual(grants, ['authorization_code']);
    } finally {
      callback.close();
    }
  }));
