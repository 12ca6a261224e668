#!/usr/bin/env node
// The Helix connector for a real Minecraft Java world: it drives players with Mineflayer
// under connector protocol v1 (docs/embodiment.md) and, with a source credential, reports
// read-only observations of the world to room-source ingress.
//
//   HELIX_CONNECTOR_CREDENTIAL=hac_... node bin/helix-minecraft-connector.mjs \
//     --config FILE --server HOST:PORT --username NAME[,NAME...] [--version V]
//     [--auth offline|microsoft] [--ledger PATH] [--owner-player NAME] [--source-config FILE]
//
// The credential is read only from the environment and never logged or written.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Connector, EXIT_REFUSED, Refused, VERSION } from '../lib/connector.mjs';
import { Player } from '../lib/player.mjs';
import { sourceSettings, startSource } from '../lib/source.mjs';

const USAGE = 'usage: helix-minecraft-connector --config FILE --server HOST:PORT --username NAME[,NAME...] '
  + '[--version V] [--auth offline|microsoft] [--ledger PATH] [--owner-player NAME] [--source-config FILE]';
const log = (line) => process.stdout.write(`${line}\n`);
function fatal(status, message) {
  process.stderr.write(`helix-minecraft-connector: ${message}\n`);
  process.exit(status);
}
const usage = (message) => fatal(EXIT_REFUSED, `${message}\n${USAGE}`);

let values;
try {
  ({ values } = parseArgs({
    options: {
      config: { type: 'string' },
      server: { type: 'string' },
      username: { type: 'string' },
      version: { type: 'string' },
      auth: { type: 'string', default: 'offline' },
      ledger: { type: 'string' },
      'owner-player': { type: 'string' },
      'source-config': { type: 'string' },
    },
    strict: true,
  }));
} catch (e) {
  usage(e.message);
}
for (const need of ['config', 'server', 'username']) if (!values[need]) usage(`--${need} is required`);
const server = /^(.+):(\d{1,5})$/.exec(values.server);
if (!server || Number(server[2]) < 1 || Number(server[2]) > 65535) usage('--server must be HOST:PORT');
if (!['offline', 'microsoft'].includes(values.auth)) usage('--auth must be offline or microsoft');
const NAME = /^[A-Za-z0-9_]{1,16}$/;
const names = values.username.split(',').map((n) => n.trim()).filter(Boolean);
if (names.length === 0 || names.length > 32 || !names.every((n) => NAME.test(n))) usage('--username must be 1-32 player names');
const owner = values['owner-player'];
if (owner !== undefined && !NAME.test(owner)) usage('--owner-player must be a player name');
if (owner !== undefined && names.includes(owner)) usage('--owner-player must be another account than the players the connector drives');

const credential = (process.env.HELIX_CONNECTOR_CREDENTIAL ?? '').trim();
if (!/^hac_[0-9a-f]{64}$/.test(credential)) fatal(EXIT_REFUSED, 'HELIX_CONNECTOR_CREDENTIAL must hold the connector credential (hac_...) the pairing page showed');
let config;
try {
  config = JSON.parse(readFileSync(values.config, 'utf8'));
} catch (e) {
  fatal(EXIT_REFUSED, `reading the configuration ${values.config}: ${e.code ?? e.message}`);
}
const KEYS = ['protocol', 'base_url', 'environment_binding_id', 'room_id', 'world_id', 'credential_env', 'poll_interval_ms'];
if (typeof config !== 'object' || config === null || Object.keys(config).some((k) => !KEYS.includes(k))
  || config.protocol !== 'helix.connector.v1' || typeof config.base_url !== 'string' || !/^https?:\/\//.test(config.base_url)
  || typeof config.world_id !== 'string' || !Number.isInteger(config.poll_interval_ms)) {
  fatal(EXIT_REFUSED, 'the configuration is not the pairing page\'s helix.connector.v1 JSON');
}

let source;
try {
  source = sourceSettings(values['source-config']);
} catch (e) {
  fatal(EXIT_REFUSED, e.code ? `reading ${values['source-config']}: ${e.code}` : e.message);
}
if (source && source.bearer === credential) fatal(EXIT_REFUSED, 'the source bearer and the connector credential must differ');

const players = names.map((username) => new Player({
  host: server[1], port: Number(server[2]), username, version: values.version, auth: values.auth, log,
}));
const connector = new Connector({ config, credential, players, ledgerPath: values.ledger, ownerPlayer: owner, log, fatal });

log(`helix-minecraft-connector ${VERSION}: ${names.length} player(s) on ${values.server}, ledger epoch ${connector.ledger.epoch}`);

function shutdown() {
  for (const p of players) p.close();
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

// A new registration joins the world first (it reports each player's id and position).
// A restart with a ledger does not wait: its first poll answers what it was doing.
for (const p of players) p.connect();
if (connector.ledger.epoch === 0) {
  const joined = await Promise.race([
    Promise.all(players.map((p) => new Promise((r) => (p.online ? r() : p.once('online', r))))).then(() => true),
    new Promise((r) => setTimeout(() => r(false), 60_000)),
  ]);
  if (!joined) log('not every player joined within 60 s: registering those that did (the others join later)');
}
startSource({ players, settings: source, log });
try {
  await connector.run();
} catch (e) {
  if (e instanceof Refused) {
    const hint = {
      connector_credential_invalid: 'the credential is wrong, rotated or revoked: pair again on /account/room-connectors',
      connector_registration_refused: 'Helix refused this connector (schema hash, capabilities or world do not match the pairing)',
    }[e.code] ?? 'Helix refused the request';
    fatal(EXIT_REFUSED, `${e.message}: ${hint}`);
  }
  fatal(1, e?.stack ?? String(e));
}
