// Shared bits of the benchmark: loopback-only URLs and raw JSON-RPC POSTs with the
// headers a Streamable HTTP client sends.
import http from 'node:http';

export const PROTOCOL_VERSION = '2025-11-25';

export function loopbackUrl(raw) {
  const url = new URL(raw);
  if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
    throw new Error(`refusing non-loopback target ${raw}`);
  }
  return url;
}

export function mcpHeaders(token, bodyLength) {
  return {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': PROTOCOL_VERSION,
    Authorization: `Bearer ${token}`,
    'Content-Length': String(bodyLength),
  };
}

/** One JSON-RPC POST; resolves { status, body (Buffer) }. */
export function post(url, agent, token, payload, timeoutMs = 30_000) {
  const data = Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload));
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: mcpHeaders(token, data.length),
        timeout: timeoutMs,
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timeout')));
    req.on('error', reject);
    req.end(data);
  });
}

/** One authenticated GET (the REST facade); resolves { status, body (Buffer) }. */
export function get(url, agent, token, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port,
        path: url.pathname + url.search,
        method: 'GET',
        agent,
        headers: { Accept: 'application/json', Authorization: `Bearer ${token}` },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** JSON-RPC call that must succeed; returns `result`. */
export async function rpc(url, token, method, params, id = 1) {
  const agent = new http.Agent({ keepAlive: false });
  const { status, body } = await post(url, agent, token, { jsonrpc: '2.0', id, method, params });
  agent.destroy();
  if (status !== 200) throw new Error(`${method}: HTTP ${status}: ${body.toString('utf8').slice(0, 500)}`);
  const msg = JSON.parse(body.toString('utf8'));
  if (msg.error) throw new Error(`${method}: JSON-RPC error ${JSON.stringify(msg.error)}`);
  return msg.result;
}
