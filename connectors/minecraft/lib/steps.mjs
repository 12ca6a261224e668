// One v1 step in the real world with Mineflayer: the checks that refuse it before it
// touches the world (`rejected`), how it runs, and the observation read from the world
// after it (the player entity, the block, the held item, the server's chat echo), never
// from the command.
import pathfinderPkg from 'mineflayer-pathfinder';
import { Vec3 } from 'vec3';
import { DESTINATIONS, FACES, REACH, chatRefusal, chatRule, minecraftName } from './rules.mjs';

const { goals } = pathfinderPkg;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The longest a step waits on the world. */
export const STEP_LIMIT_MS = 60_000;
const ns = (name) => `minecraft:${name}`;

/** The distance from the player's eyes to the centre of block `v`. */
function reach(bot, v) {
  const eyes = bot.entity.position.offset(0, bot.entity.eyeHeight ?? 1.62, 0);
  return eyes.distanceTo(v.offset(0.5, 0.5, 0.5));
}

function carried(bot, name) {
  return bot.inventory.items().find((i) => i.name === name) ?? null;
}

/** What is in an equipment slot now. */
function inSlot(bot, slot) {
  const dest = DESTINATIONS[slot];
  const item = dest === 'hand' ? bot.heldItem : bot.inventory.slots[bot.getEquipmentDestSlot(dest)];
  return item ? ns(item.name) : 'minecraft:air';
}

/** Why `step` must not run for this player now (nothing touched), or null. */
export function refusal(player, step) {
  const bot = player.bot;
  if (!player.online || !bot?.entity) return 'player_offline';
  switch (step.type) {
    case 'chat':
      return chatRefusal(step.text);
    case 'break_block': {
      const name = minecraftName(step.expected_block);
      if (!name) return 'invalid_id';
      const v = new Vec3(step.x, step.y, step.z);
      if (reach(bot, v) > REACH) return 'out_of_reach';
      const block = bot.blockAt(v);
      if (!block) return 'out_of_reach';
      if (block.name !== name || block.name === 'air') return 'unexpected_block';
      return null;
    }
    case 'place_block': {
      const name = minecraftName(step.item);
      if (!name) return 'invalid_id';
      if (!carried(bot, name)) return 'not_in_inventory';
      const v = new Vec3(step.x, step.y, step.z);
      if (reach(bot, v) > REACH) return 'out_of_reach';
      const at = bot.blockAt(v);
      if (!at || at.boundingBox !== 'empty') return 'occupied';
      const support = bot.blockAt(v.minus(new Vec3(...FACES[step.face])));
      if (!support || support.boundingBox !== 'block') return 'no_support';
      return null;
    }
    case 'equip': {
      const name = minecraftName(step.item);
      if (!name) return 'invalid_id';
      if (!carried(bot, name) && inSlot(bot, step.slot) !== step.item) return 'not_in_inventory';
      return null;
    }
    case 'move_to': case 'look_at': case 'wait': case 'stop':
      return null;
    default:
      return 'not_supported';
  }
}

/**
 * Runs `step`; `run.halted` is a promise that settles when the step must stop (an
 * Emergency Stop, a cancel, a person taking over, the dead-man halt, the player gone).
 * Answers `{ status, observation, reason }` from what the world shows afterwards.
 */
export async function execute(player, step, run) {
  const bot = player.bot;
  // Every wait on the world is bounded: a path, a dig or a placement that never ends (a
  // server that never answers) halts the player after `run.limitMs` and the world decides.
  const until = (p) => {
    let timer;
    const limit = new Promise((resolve, reject) => {
      timer = setTimeout(() => {
        player.halt();
        reject(new Error('step_timeout'));
      }, run.limitMs ?? STEP_LIMIT_MS);
    });
    return Promise.race([p, run.halted, limit]).finally(() => clearTimeout(timer));
  };
  const position = () => player.position();
  switch (step.type) {
    case 'move_to': {
      const goal = step.range === 0
        ? new goals.GoalBlock(step.x, step.y, step.z)
        : new goals.GoalNear(step.x, step.y, step.z, step.range);
      try {
        await until(bot.pathfinder.goto(goal));
      } catch (e) {
        if (!run.stopped) {
          player.log(`player ${player.username}: move_to failed: ${String(e?.message ?? e).slice(0, 120)}`);
          return { status: 'failed', reason: 'no_path' };
        }
      }
      if (run.stopped) return null;
      await sleep(100); // the last position packet
      return { status: 'completed', observation: { position: position() } };
    }
    case 'break_block': {
      const v = new Vec3(step.x, step.y, step.z);
      try {
        await until(bot.dig(bot.blockAt(v), true));
      } catch { /* halted, or the server refused it: the world decides below */ }
      return { status: 'completed', observation: await blockAfter(bot, v, (n) => n === 'air'), mutating: true };
    }
    case 'place_block': {
      const v = new Vec3(step.x, step.y, step.z);
      const face = new Vec3(...FACES[step.face]);
      try {
        await until(bot.equip(carried(bot, minecraftName(step.item)), 'hand'));
        if (!run.stopped) await until(bot.placeBlock(bot.blockAt(v.minus(face)), face));
      } catch { /* the world decides below */ }
      return { status: 'completed', observation: await blockAfter(bot, v, (n) => ns(n) === step.item), mutating: true };
    }
    case 'equip': {
      try {
        await until(bot.equip(carried(bot, minecraftName(step.item)), DESTINATIONS[step.slot]));
      } catch { /* the slot decides below */ }
      return { status: 'completed', observation: { equipped: inSlot(bot, step.slot) }, mutating: true };
    }
    case 'chat': {
      // The line the rule delivers (the refusal check ran before): what was checked is what is sent.
      const line = chatRule(step.text).text;
      const echo = new Promise((resolve) => {
        const onChat = (who, text) => {
          if (who === bot.username && text === line) {
            player.off('chat', onChat);
            resolve(text);
          }
        };
        player.on('chat', onChat);
        setTimeout(() => { player.off('chat', onChat); resolve(null); }, 3000);
      });
      bot.chat(line);
      const seen = await echo;
      // Sent: without its echo the effect is not readable (Helix keeps it `verifying`).
      return { status: 'completed', observation: seen === null ? null : { chat_echo: seen }, mutating: true };
    }
    case 'look_at':
      await until(bot.lookAt(new Vec3(step.x + 0.5, step.y + 0.5, step.z + 0.5), true));
      return run.stopped ? null : { status: 'completed', observation: { position: position() } };
    case 'wait':
      await until(sleep(step.ticks * 50));
      return run.stopped ? null : { status: 'completed', observation: { position: position() } };
    case 'stop':
      player.halt();
      return { status: 'completed', observation: { position: position() } };
    default:
      return { status: 'failed', reason: 'not_supported' };
  }
}

/** The block at `v` once `done(name)` holds, or after a second (a block update lands a
 * tick later), as the world shows it. */
async function blockAfter(bot, v, done) {
  for (let i = 0; i < 20; i += 1) {
    const name = bot.blockAt(v)?.name;
    if (name && done(name)) break;
    await sleep(50);
  }
  const name = bot.blockAt(v)?.name;
  return name ? { block_at_target: ns(name) } : null;
}
