// The southbound connector protocol v1 over HTTP (docs/embodiment.md): register and
// poll, with the credential as a bearer. It is never logged or echoed: errors carry
// only the route, the HTTP status and Helix's error code.

export const PROTOCOL = 'helix.connector.v1';
export const BASE = '/api/connectors/v1';

/** Helix was not reached, or answered 5xx: the dead-man clock keeps running. */
export class Unreachable extends Error {}
/** Helix refused the request (4xx) with this error `code` (and `details`). */
export class Refused extends Error {
  constructor(route, status, code, details) {
    super(`${route}: ${status} ${code}${details?.reason ? ` (${details.reason})` : ''}`);
    Object.assign(this, { status, code, details: details ?? {} });
  }
}

export class HelixClient {
  constructor(baseUrl, credential, { timeoutMs = 10_000 } = {}) {
    this.base = `${baseUrl.replace(/\/+$/, '')}${BASE}`;
    this.credential = credential;
    this.timeoutMs = timeoutMs;
  }

  async post(route, body) {
    let res;
    try {
      res = await fetch(`${this.base}/${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.credential}` },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new Unreachable(`${route}: ${e?.cause?.code ?? e?.name ?? 'network error'}`);
    }
    const text = await res.text().catch(() => '');
    let value = null;
    try {
      value = text ? JSON.parse(text) : null;
    } catch { /* not JSON */ }
    if (res.status >= 500) throw new Unreachable(`${route}: HTTP ${res.status}`);
    if (!res.ok) throw new Refused(route, res.status, value?.error?.code ?? 'error', value?.error?.details);
    return value;
  }

  register(body) {
    return this.post('register', body);
  }

  poll(body) {
    return this.post('poll', body);
  }
}
