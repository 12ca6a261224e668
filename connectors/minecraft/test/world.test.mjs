// The connector against a real Minecraft-protocol world (flying-squid on loopback), one
// world and one `helix serve` for every case: an agent drives a player over MCP, and an
// independent observer bot confirms each effect in the world.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  agent, http, observer, pairedRoom, prepare, sleep, startConnector, startHelix, startWorld, until,
} from './lib/harness.mjs';

const GRASS_Y = 4; // superflat: grass at y=4, players stand at y=5
let world; let h; let room; let conn; let eye; let ai; let subjectRef;

before(async () => {
  world = await startWorld();
  h = await startHelix({}, prepare);
  room = await pairedRoom(h);
  eye = await observer(world.port, 'Owner');
  conn = startConnector(room, world.port, ['--username', 'Alex', '--owner-player', 'Owner']);
  await conn.waitLine(/registered environment .* at epoch 1/, 60_000);
  ai = await agent(h, room.roomId);
  const listing = await ai.ok('helix_environment_subject_list', { room_id: room.roomId });
  const env = listing.environments.find((e) => e.environment_binding_id === room.bindingId);
  assert.equal(env.subjects.length, 1, JSON.stringify(env));
  subjectRef = env.subjects[0].subject_ref;
  await ai.ok('helix_environment_subject_select', { room_id: room.roomId, environment_binding_id: room.bindingId, subject_ref: subjectRef });
  eye.say('/give Alex dirt 8');
  await until(() => eye.where('Alex'), 10_000, 'the observer sees Alex');
});

after(async () => {
  await ai?.close().catch(() => {});
  await conn?.stop();
  eye?.quit();
  await h?.stop();
  await world?.stop();
});

test('full loop: move_to, break_block, place_block, equip and chat succeed, each effect seen by the observer', async () => {
  const move = await ai.queue({ type: 'move_to', x: 3, y: 5, z: 3, range: 1 });
  await ai.settle(move, ['succeeded']);
  const at = eye.where('Alex');
  assert.ok(Math.abs(at.x - 3.5) <= 1.6 && Math.abs(at.z - 3.5) <= 1.6, `the observer sees Alex near (3, 5, 3): ${at}`);

  assert.equal(eye.block(4, GRASS_Y, 4), 'grass_block');
  const brk = await ai.queue({ type: 'break_block', x: 4, y: GRASS_Y, z: 4, expected_block: 'minecraft:grass_block' });
  await ai.settle(brk, ['succeeded']);
  await until(() => eye.block(4, GRASS_Y, 4) === 'air', 2000, 'the observer sees air');

  const place = await ai.queue({ type: 'place_block', x: 4, y: GRASS_Y, z: 4, item: 'minecraft:dirt', face: 'up' });
  await ai.settle(place, ['succeeded']);
  await until(() => eye.block(4, GRASS_Y, 4) === 'dirt', 2000, 'the observer sees dirt');

  const equip = await ai.queue({ type: 'equip', item: 'minecraft:dirt', slot: 'mainhand' });
  await ai.settle(equip, ['succeeded']);

  const line = `hello from Alex ${Date.now()}`;
  const chat = await ai.queue({ type: 'chat', text: line });
  await ai.settle(chat, ['succeeded']);
  assert.ok(eye.chat.includes(`<Alex> ${line}`), `the observer read the line: ${eye.chat.slice(-5)}`);
});
