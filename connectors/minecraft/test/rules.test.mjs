// The connector's own checks and its command line, without a world.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { helixBin } from '../../../conformance/node/lib/helix-server.mjs';
import {
  CAPABILITIES, DEFAULT_IGNORABLE, MAX_CHAT_CHARS, SCHEMA_HASH, SLASH_LIKE, chatRefusal, chatRule, minecraftName,
} from '../lib/rules.mjs';
import { PKG, child, pairedRoom, prepare, startHelix } from './lib/harness.mjs';

test('the schema hash the connector registers is the admitted action schema of this Helix', () => {
  const admitted = execFileSync(helixBin(), ['connector-sim', '--print-schema-hash'], { encoding: 'utf8' }).trim();
  assert.equal(SCHEMA_HASH, admitted);
  assert.ok(!CAPABILITIES.includes('craft'), 'craft is not declared: the test world cannot prove it');
});

test('chat: a leading slash or look-alike after normalisation is a command; § and control characters are refused', () => {
  const commands = ['/op me', ' /op', '\u3000/op', '\u200b/op', '\ufeff/op', '\uff0fop', '\u2044op', '\u2215op',
    '\u29f8op', '\u00a0\u2215op', '\u2060\u2044op', '\ufe6bop'.replace('\ufe6b', '\uff0f'), '\t/op'];
  for (const t of commands) assert.equal(chatRefusal(t), 'chat_command', JSON.stringify(t));
  for (const t of ['a\u00a7cred', 'x\u0007', 'x\u007f', 'line\nbreak', '', 'x'.repeat(257)]) {
    assert.equal(chatRefusal(t), 'chat_text', JSON.stringify(t));
  }
  for (const t of ['hello', 'a/b', 'hi /op', 'café ½']) assert.equal(chatRefusal(t), null, JSON.stringify(t));
});

test('chat: the rule is Helix\'s own, list for list and vector for vector (docs/connector-protocol/chat-rule.json)', () => {
  const rule = JSON.parse(readFileSync(new URL('../../../docs/connector-protocol/chat-rule.json', import.meta.url), 'utf8'));
  assert.deepEqual(SLASH_LIKE, rule.slash_like);
  assert.deepEqual(DEFAULT_IGNORABLE, rule.default_ignorable);
  assert.equal(MAX_CHAT_CHARS, rule.max_chars);
  assert.ok(rule.vectors.length >= 40);
  for (const v of rule.vectors) {
    const want = 'refused' in v ? { refused: v.refused } : { text: v.delivered };
    assert.deepEqual(chatRule(v.input), want, JSON.stringify(v.input));
  }
  // Every code point that is a look-alike slash, after an invisible prefix, is a command.
  for (const cp of SLASH_LIKE) {
    assert.equal(chatRefusal(`\u3000\u200b${String.fromCodePoint(cp)}op`), 'chat_command', cp.toString(16));
  }
});

test('ids: only canonical minecraft: ids name a block or item', () => {
  assert.equal(minecraftName('minecraft:oak_log'), 'oak_log');
  for (const id of ['oak_log', 'Minecraft:oak_log', 'minecraft:', 'mod:thing', 'minecraft:oak_log ', 'minecraft:../x', 'minecraft:a:b']) {
    assert.equal(minecraftName(id), null, id);
  }
});

test('a missing credential or a bad command line exits at once with a clear message, never retrying', async () => {
  const bin = join(PKG, 'bin/helix-minecraft-connector.mjs');
  const h = await startHelix({}, prepare);
  let room;
  try {
    room = await pairedRoom(h);
    const base = ['--config', room.configPath, '--server', '127.0.0.1:1', '--username', 'Alex'];
    const none = child(process.execPath, [bin, ...base], { HELIX_CONNECTOR_CREDENTIAL: '' });
    assert.equal((await none.exited).code, 2);
    assert.ok(none.lines.some((l) => l.includes('HELIX_CONNECTOR_CREDENTIAL must hold')), none.lines.join('\n'));
    const owner = child(process.execPath, [bin, ...base, '--owner-player', 'Alex'], { HELIX_CONNECTOR_CREDENTIAL: room.credential });
    assert.equal((await owner.exited).code, 2);
    const unknown = child(process.execPath, [bin, ...base, '--password', 'x'], { HELIX_CONNECTOR_CREDENTIAL: room.credential });
    assert.equal((await unknown.exited).code, 2);
  } finally {
    await h.stop();
    if (room) rmSync(room.dir, { recursive: true, force: true });
  }
});
