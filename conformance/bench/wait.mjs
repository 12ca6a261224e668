// Wait until GET <url> answers with one of the given HTTP statuses (default 200).
//   node wait.mjs URL [timeout_s] [status,...]
import { loopbackUrl } from './lib.mjs';

const url = loopbackUrl(process.argv[2]);
const timeoutMs = Number(process.argv[3] ?? '60') * 1000;
const accept = (process.argv[4] ?? '200').split(',').map(Number);
const deadline = Date.now() + timeoutMs;
let last = 'no attempt';
while (Date.now() < deadline) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    if (accept.includes(res.status)) process.exit(0);
    last = `HTTP ${res.status}`;
  } catch (e) {
    last = String(e?.cause?.code ?? e);
  }
  await new Promise((r) => setTimeout(r, 100));
}
console.error(`not ready after ${timeoutMs} ms: ${url} (${last})`);
process.exit(1);
