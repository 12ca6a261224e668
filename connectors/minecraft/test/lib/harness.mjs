// The parts of the Minecraft connector tests: the test world (a real flying-squid
// process), a real `helix serve` (conformance/node/lib/helix-server.mjs), a room paired
// through the cookie route, the connector as its own process, an agent over the official
// MCP TypeScript SDK, and an independent observer bot that reads the world itself.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import mineflayer from 'mineflayer';
import { Vec3 } from 'vec3';
import { guardPackets } from '../../lib/player.mjs';
import {
  FULL_SCOPE, freePort, helixBin, mintToken, SUBJECT, TENANT,
} from '../../../../conformance/node/lib/helix-server.mjs';

export { startHelix } from '../../../../conformance/node/lib/helix-server.mjs';
export const PKG = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The Minecraft version of the test world and every bot (MC_VERSION; 1.19.4 is where
 * flying-squid shows other players correctly, so the observer sees the driven player). */
export const MC_VERSION = process.env.MC_VERSION ?? '1.19.4';
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const key = (p) => `mc-${p}-${randomUUID()}`;
const EMBODIMENT_SCOPE = 'helix.rooms.read helix.rooms.manage helix.environment_actions.read helix.environment_actions.write';

/** Waits until `fn()` is truthy (polled every `every` ms); answers its value. `what`
 * (or what it answers, read at the time-out) names what was awaited. */
export async function until(fn, ms = 15_000, what = 'condition', every = 50) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await sleep(every);
  }
}

/** A child process whose output lines are kept (and awaited). */
export function child(cmd, args, env = {}) {
  const p = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines = [];
  const take = (chunk) => {
    for (const l of String(chunk).split('\n')) if (l) lines.push(l);
    if (process.env.MC_DEBUG_LOG) appendFileSync(process.env.MC_DEBUG_LOG, `[${p.pid}] ${chunk}`);
  };
  p.stdout.on('data', take);
  p.stderr.on('data', take);
  const exited = new Promise((r) => p.on('exit', (code, sig) => r({ code, sig })));
  return {
    proc: p, lines, exited,
    // The lines are read when it times out (not when it starts waiting).
    waitLine: (re, ms = 20_000) => until(() => lines.find((l) => re.test(l)), ms, () => `a line ${re} in:\n${lines.slice(-30).join('\n')}`),
    stop: async (sig = 'SIGTERM') => { if (p.exitCode === null && p.signalCode === null) p.kill(sig); await exited; },
  };
}

/** The test world on a free port. */
export async function startWorld() {
  const port = await freePort();
  const w = child(process.execPath, [join(PKG, 'bin/helix-test-world.mjs'), '--port', String(port), '--version', MC_VERSION]);
  await w.waitLine(/^helix-test-world ready on 127\.0\.0\.1:\d+/);
  return { ...w, port };
}

/** A bot of the test (not driven by Helix): it reads the world to confirm each effect. */
export async function observer(port, username = 'Observer') {
  const bot = mineflayer.createBot({ host: '127.0.0.1', port, username, auth: 'offline', version: MC_VERSION, hideErrors: true });
  guardPackets(bot._client, (m) => process.stderr.write(`observer ${username}: ${m}\n`));
  const chat = [];
  bot.on('messagestr', (text) => { try { chat.push(text); } catch { /* guarded */ } });
  await new Promise((res, rej) => { bot.once('spawn', res); bot.once('error', rej); bot.once('kicked', rej); });
  return {
    bot, chat,
    block: (x, y, z) => bot.blockAt(new Vec3(x, y, z))?.name ?? null,
    /** Where the server's entity of `name` is, as this bot sees it (or null). */
    where: (name) => {
      // A player who joined again may be seen as an entity before (or without) its player
      // entry being linked to it: look the entity up by name too.
      const e = bot.players[name]?.entity
        ?? Object.values(bot.entities).find((x) => x?.type === 'player' && x.username === name);
      return e?.position?.clone() ?? null;
    },
    say: (text) => bot.chat(text),
    quit: () => bot.quit(),
  };
}

const helix = (args) => execFileSync(helixBin(), args, { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });

/** `prepare` of startHelix: an embodiment token, the developer flag, a browser session. */
export function prepare({ dataDir, tokens }) {
  tokens.embodiment = mintToken(dataDir, EMBODIMENT_SCOPE);
  tokens.sources = mintToken(dataDir,
    'helix.agent_runs.read helix.agent_runs.write helix.rooms.read helix.rooms.manage helix.room_sources.manage');
  helix(['account', 'policy', '--data-dir', dataDir, '--subject', SUBJECT, '--tenant', TENANT, '--developer', 'true']);
  tokens.cookie = `helix_session=${helix(['dev-session', '--data-dir', dataDir, '--subject', SUBJECT, '--tenant', TENANT]).trim()}`;
  // A second person of the same tenant, who may join the developer's room.
  tokens.member = mintToken(dataDir, EMBODIMENT_SCOPE, MEMBER);
  tokens.memberCookie = `helix_session=${helix(['dev-session', '--data-dir', dataDir, '--subject', MEMBER, '--tenant', TENANT]).trim()}`;
}

const MEMBER = 'dev-member';

/** A form post with a session cookie as a same-origin page sends it: `{ status, html }`. */
async function page(h, path, fields, cookie) {
  const res = await fetch(`${h.baseUrl}${path}`, {
    method: 'POST', redirect: 'manual', body: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: h.baseUrl, 'sec-fetch-site': 'same-origin' },
  });
  return { status: res.status, html: await res.text() };
}

/** The second person joins the room on the pages, with the owner's invite (no action
 * authority is granted). */
export async function secondMember(h, room) {
  const invite = await page(h, '/rooms/invite', { room_id: room.roomId }, h.tokens.cookie);
  const code = /id="invite-code"[^>]*>\s*([^<\s]+)\s*</.exec(invite.html)?.[1];
  assert.ok(code, `an invite code: ${invite.status} ${invite.html.slice(0, 300)}`);
  const preview = await page(h, '/rooms/join/preview', { code }, h.tokens.memberCookie);
  const consent = /name="consent_version"[^>]*value="(\d+)"/.exec(preview.html)?.[1]
    ?? /value="(\d+)"[^>]*name="consent_version"/.exec(preview.html)?.[1];
  assert.ok(consent, `the consent version: ${preview.status} ${preview.html.slice(0, 300)}`);
  const joined = await page(h, '/rooms/join', { code, consent_version: consent }, h.tokens.memberCookie);
  assert.ok([200, 303].includes(joined.status), `join: ${joined.status} ${joined.html.slice(0, 300)}`);
  return { bearer: h.tokens.member };
}

/** One HTTP request: `{ status, body }`; a bearer, or the cookie as a same-origin page sends it. */
export async function http(h, method, path, body, { bearer, cookie, idem } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (cookie) Object.assign(headers, { cookie, origin: h.baseUrl, 'sec-fetch-site': 'same-origin' });
  if (idem) headers['idempotency-key'] = idem;
  const res = await fetch(`${h.baseUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

/** A room of the developer and a connector paired for it through the cookie route. */
export async function pairedRoom(h) {
  const room = await http(h, 'POST', '/api/v1/rooms', { name: 'Minecraft' }, { bearer: h.tokens.embodiment, idem: key('room') });
  assert.equal(room.status, 201, JSON.stringify(room.body));
  const pairing = await http(h, 'POST', '/api/account/room-connectors/pairings',
    { room_id: room.body.room_id, world_id: 'overworld' }, { cookie: h.tokens.cookie });
  assert.equal(pairing.status, 201, JSON.stringify(pairing.body));
  const dir = mkdtempSync(join(tmpdir(), 'helix-mc-'));
  const configPath = join(dir, 'connector.json');
  writeFileSync(configPath, JSON.stringify(pairing.body.connector_config));
  return {
    roomId: room.body.room_id, bindingId: pairing.body.environment_binding_id,
    credential: pairing.body.connector_credential, config: pairing.body.connector_config, configPath, dir,
  };
}

/** The connector process. */
export function startConnector(room, port, args = [], env = {}) {
  return child(process.execPath, [join(PKG, 'bin/helix-minecraft-connector.mjs'), '--config', room.configPath,
    '--server', `127.0.0.1:${port}`, '--version', MC_VERSION, ...args], { HELIX_CONNECTOR_CREDENTIAL: room.credential, ...env });
}

/** The agent: the official MCP SDK over Streamable HTTP with a bearer. */
export async function agent(h, roomId, bearer = h.tokens.embodiment) {
  const client = new Client({ name: 'helix-minecraft-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(h.mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${bearer}` } },
  }));
  await client.listTools();
  const call = async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    return { isError: Boolean(r.isError), sc: r.structuredContent };
  };
  const ok = async (name, args) => {
    const r = await call(name, args);
    assert.ok(!r.isError, `${name}: ${JSON.stringify(r.sc)}`);
    return r.sc;
  };
  const status = (ref) => ok('helix_minecraft_workflow_status', { room_id: roomId, workflow_ref: ref });
  return {
    client, call, ok, status,
    act: (action) => call('helix_minecraft_player_action', { room_id: roomId, idempotency_key: key('act'), action }),
    queue: async (action) => {
      const r = await call('helix_minecraft_player_action', { room_id: roomId, idempotency_key: key('act'), action });
      assert.ok(!r.isError && r.sc.status === 'queued', JSON.stringify(r.sc));
      return r.sc.workflow_ref;
    },
    control: (ref, control) => call('helix_minecraft_workflow_control', { room_id: roomId, workflow_ref: ref, control }),
    /** Waits until the workflow is in one of `states`; answers its status. */
    settle: (ref, states, ms = 20_000) => {
      let last = null;
      return until(async () => {
        last = await status(ref);
        return states.includes(last.status) ? last : null;
      }, ms, () => `${ref} in ${states} (last: ${last?.status} ${last?.reason ?? ''})`, 100);
    },
    close: () => client.close(),
  };
}

/** A loopback TCP proxy in front of Helix: `cut()` partitions the connector from it
 * (every connection dropped, new ones closed at once), `heal()` ends the partition. */
export async function proxy(targetPort) {
  const { createServer, connect } = await import('node:net');
  const sockets = new Set();
  let cut = false;
  const server = createServer((client) => {
    if (cut) return client.destroy();
    const upstream = connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return {
    port,
    cut: () => { cut = true; for (const s of sockets) s.destroy(); },
    heal: () => { cut = false; },
    close: () => { for (const s of sockets) s.destroy(); server.close(); },
  };
}

/** A form post as the signed-in owner's page sends it. */
export async function form(h, path, fields) {
  const res = await fetch(`${h.baseUrl}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded', cookie: h.tokens.cookie, origin: h.baseUrl, 'sec-fetch-site': 'same-origin',
    },
    body: new URLSearchParams(fields).toString(),
  });
  await res.text();
  return res.status;
}

/** Samples `where()` every 50 ms until it has not moved for `quietMs`; answers the time
 * of its last change (epoch ms). */
export async function haltedAt(where, quietMs = 600, ms = 15_000) {
  let last = where();
  let changed = Date.now();
  const end = Date.now() + ms;
  while (Date.now() < end) {
    await sleep(50);
    const now = where();
    if (now && last && now.distanceTo(last) > 0.01) changed = Date.now();
    last = now;
    if (Date.now() - changed >= quietMs) return changed;
  }
  throw new Error('the player never stopped moving');
}

/** A read-only `minecraft` source of the room, claimed on the cookie route: its bearer,
 * and the plugin configuration written to a file. */
export async function claimedSource(h, room) {
  const created = await http(h, 'POST', `/api/v1/rooms/${room.roomId}/sources`,
    { adapter_profile: 'minecraft', world_id: 'overworld' }, { bearer: h.tokens.sources, idem: key('src') });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const claim = await http(h, 'POST', '/api/account/room-sources/credential-claims',
    { claim_handle: created.body.credential_delivery.claim_handle }, { cookie: h.tokens.cookie });
  assert.equal(claim.status, 201, JSON.stringify(claim.body));
  const path = join(room.dir, 'plugin.json');
  writeFileSync(path, JSON.stringify(claim.body.plugin_config));
  return { bearer: claim.body.source_bearer, configPath: path };
}

/**
 * A `helix serve` this test can kill -9 and start again on the same port and data dir
 * (the embedded store keeps everything): `{ baseUrl, mcpUrl, tokens, kill9(), restart(), stop() }`.
 */
export async function killableHelix(env = {}) {
  const tmp = mkdtempSync(join(tmpdir(), 'helix-mc-serve-'));
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const tokens = { full: mintToken(dataDir, FULL_SCOPE) };
  prepare({ dataDir, tokens });
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  let proc = null;
  const start = async () => {
    proc = child(helixBin(), ['serve', '--addr', `127.0.0.1:${port}`, '--data-dir', dataDir], env);
    await until(async () => {
      try {
        const r = await fetch(`${baseUrl}/.well-known/oauth-protected-resource`, { signal: AbortSignal.timeout(2000) });
        await r.arrayBuffer();
        return r.status === 200;
      } catch {
        return false;
      }
    }, 60_000, 'helix serve ready', 100);
  };
  await start();
  return {
    baseUrl, mcpUrl: `${baseUrl}/mcp`, tokens, dataDir,
    logTail: () => proc.lines.slice(-40).join('\n'),
    kill9: () => proc.stop('SIGKILL'),
    restart: start,
    stop: async () => { await proc.stop(); rmSync(tmp, { recursive: true, force: true }); },
  };
}
