#!/usr/bin/env node
// A Minecraft Java test world on loopback, for tests and walkthroughs (never for play):
// flying-squid on 127.0.0.1, offline mode, superflat (bedrock at y=0, dirt, grass at
// y=4: players stand at y=5), a fixed seed, every player op, survival, the world kept in
// memory only. It prints one ready line on stdout and stops on SIGTERM or SIGINT.
//
//   node bin/helix-test-world.mjs --port P [--version 1.19.4] [--seed N]
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);

const USAGE = 'usage: helix-test-world --port P [--version 1.19.4] [--seed N]';

function fail(message) {
  process.stderr.write(`helix-test-world: ${message}\n${USAGE}\n`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      port: { type: 'string' },
      version: { type: 'string', default: '1.19.4' },
      seed: { type: 'string', default: '12345' },
    },
    strict: true,
  }));
} catch (e) {
  fail(e.message);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) fail('--port must be a port number (1-65535)');
const seed = Number(values.seed);
if (!Number.isSafeInteger(seed)) fail('--seed must be an integer');

// flying-squid logs to stdout and opens a prompt there: this process prints only its ready
// line on stdout; everything else the server writes goes to stderr.
const toStderr = (...args) => process.stderr.write(`${args.join(' ')}\n`);
const readyOut = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);
console.log = toStderr;

const { createMCServer } = require('flying-squid');
const server = createMCServer({
  host: '127.0.0.1',
  port,
  'online-mode': false,
  'everybody-op': true,
  gameMode: 0,
  difficulty: 0,
  'view-distance': 3,
  'max-players': 20,
  motd: 'Helix test world',
  version: values.version,
  worldFolder: undefined,
  generation: { name: 'superflat', options: { seed } },
  kickTimeout: 10000,
  plugins: {},
  modpe: false,
  logging: false,
  'max-entities': 100,
  'player-list-text': { header: { text: 'Helix test world' }, footer: { text: '' } },
});

server.on('error', (e) => toStderr(`helix-test-world: server error: ${e?.message ?? e}`));
server.once('ready', () => {
  readyOut(`helix-test-world ready on 127.0.0.1:${server.listeningPort ?? port} version ${values.version} seed ${seed}\n`);
});

// Stops at once: nothing is saved (the world lives in memory only).
function stop() {
  server.destroy().catch(() => {});
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
