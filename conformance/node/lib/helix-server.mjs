// Start and stop a real `helix serve` for the conformance tests: fresh data dir in a
// temp dir, a free loopback port, tokens minted with `helix dev-token` against the
// same data dir before the server starts.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, existsSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export const FULL_SCOPE = 'helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read';
export const READ_ONLY_SCOPE = 'helix.agent_runs.read helix.data.research_library.read';
export const ROOM_SCOPE = `${FULL_SCOPE} helix.rooms.read helix.rooms.manage`;
export const SUBJECT = 'conformance-node';
export const TENANT = 'tenant-conformance';

const READY_TIMEOUT_MS = Number(process.env.HELIX_READY_TIMEOUT ?? '60') * 1000;

/** `$HELIX_BIN` (absolute, or relative to the repo root), else target/debug/helix. */
export function helixBin() {
  const raw = process.env.HELIX_BIN ?? 'target/debug/helix';
  return isAbsolute(raw) ? raw : join(REPO_ROOT, raw);
}

export function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
  });
}

export function mintToken(dataDir, scope, subject = SUBJECT, tenant = TENANT) {
  let out;
  try {
    out = execFileSync(
      helixBin(),
      ['dev-token', '--data-dir', dataDir, '--subject', subject, '--tenant', tenant, '--scope', scope],
      { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] },
    );
  } catch (e) {
    throw new Error(`helix dev-token failed (${e.status}): ${e.stderr ?? e.message}`);
  }
  const token = out.trim();
  if (token.split('.').length !== 3 || /\s/.test(token)) {
    throw new Error(`dev-token stdout is not a bare JWT: ${JSON.stringify(out)}`);
  }
  return token;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Start `helix serve`; `env` is added to the server's environment (e.g. HELIX_ASK_ENDPOINT).
 * `prepare({ dataDir, tokens })` runs after the default tokens are minted and before `serve`
 * starts (operator CLI steps such as `helix account policy` need the store to themselves).
 */
export async function startHelix(env = {}, prepare = undefined) {
  const bin = helixBin();
  if (!existsSync(bin)) throw new Error(`helix binary not found at ${bin} (set HELIX_BIN)`);
  const tmp = mkdtempSync(join(tmpdir(), 'helix-conf-node-'));
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const tokens = {
    full: mintToken(dataDir, FULL_SCOPE),
    readOnly: mintToken(dataDir, READ_ONLY_SCOPE),
    rooms: mintToken(dataDir, ROOM_SCOPE),
  };
  if (prepare) prepare({ dataDir, tokens });
  const port = await freePort();
  const logPath = join(tmp, 'serve.log');
  const logFd = openSync(logPath, 'w');
  const child = spawn(bin, ['serve', '--addr', `127.0.0.1:${port}`, '--data-dir', dataDir], {
    stdio: ['ignore', logFd, logFd],
    env: { ...process.env, ...env },
  });
  closeSync(logFd);
  let exited = null;
  const exitPromise = new Promise((res) => child.on('exit', (code, sig) => { exited = { code, sig }; res(); }));

  const baseUrl = `http://127.0.0.1:${port}`;
  const helix = {
    baseUrl,
    mcpUrl: `${baseUrl}/mcp`,
    tokens,
    dataDir,
    logTail(n = 60) {
      try {
        return readFileSync(logPath, 'utf8').split('\n').slice(-n).join('\n');
      } catch {
        return '(no log)';
      }
    },
    async stop() {
      if (exited === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => { if (exited === null) child.kill('SIGKILL'); }, 10_000);
        await exitPromise;
        clearTimeout(timer);
      }
      if (process.env.HELIX_KEEP_DATA !== '1') rmSync(tmp, { recursive: true, force: true });
    },
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = 'no attempt';
  while (Date.now() < deadline) {
    if (exited !== null) {
      const tail = helix.logTail();
      await helix.stop();
      throw new Error(`helix serve exited early (${JSON.stringify(exited)}):\n${tail}`);
    }
    try {
      const res = await fetch(`${baseUrl}/.well-known/oauth-protected-resource`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return helix;
      last = `HTTP ${res.status}`;
    } catch (e) {
      last = String(e?.cause?.code ?? e);
    }
    await sleep(100);
  }
  const tail = helix.logTail();
  await helix.stop();
  throw new Error(`helix serve not ready after ${READY_TIMEOUT_MS} ms (${last}):\n${tail}`);
}

/** Run `fn(helix)` against a fresh server; always stop it; add the server log to a failure. */
export async function withHelix(fn, env = {}, prepare = undefined) {
  const helix = await startHelix(env, prepare);
  try {
    await fn(helix);
  } catch (e) {
    if (e && typeof e === 'object') {
      try {
        e.message = `${e.message}\n--- helix serve log (tail) ---\n${helix.logTail()}`;
      } catch { /* read-only message */ }
    }
    throw e;
  } finally {
    await helix.stop();
  }
}
