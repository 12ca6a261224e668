// The connector's own checks of a command before it touches the world: the same rules
// Helix applies before queuing, applied again here (a connector never trusts that only
// Helix talks to it), plus the ids and slots of this game.

/** The SHA-256 of the admitted action schema this connector was built against (what
 * `helix connector-sim --print-schema-hash` prints; a test compares the two). */
export const SCHEMA_HASH = '6b65b422bc8476c60e8f33faa818d77bba1ac4cb5d8195a4e544ffcdfda5d02d';

/** The v1 step types this connector executes. `craft` is left out: the test world
 * (flying-squid) has no crafting, so it cannot be proven here (docs/embodiment.md). */
export const CAPABILITIES = ['move_to', 'look_at', 'stop', 'break_block', 'place_block', 'equip', 'chat', 'wait'];

/** Steps that change the world (an interrupted one may have happened). */
export const MUTATING = new Set(['break_block', 'place_block', 'craft', 'equip', 'chat']);

/** The survival reach of a player, in blocks from the eyes to the block's centre. */
export const REACH = 4.5;

/** Characters that look like a `/` (a command) after normalisation. */
const SLASHES = new Set(['/', '\u2044', '\u2215', '\u29F8', '\uFF0F', '\u2571', '\u27CB', '\u1735', '\u3033', '\u30CE', '\u4E3F', '\u2CC6', '\u0338', '\u337A']);
/** Leading characters stripped before the slash check: white space, format, control. */
const LEADING = /^[\p{White_Space}\p{Cf}\p{Cc}]+/u;

/**
 * Why a chat line must not be sent (`chat_command`, `chat_text`), or null. The text is
 * normalised (NFKC), leading white space, format and control characters are stripped,
 * then a leading `/` or a look-alike slash is a command; `§` (formatting codes) and any
 * character below 0x20 or 0x7f anywhere is refused.
 */
export function chatRefusal(text) {
  if (typeof text !== 'string' || text.length === 0 || [...text].length > 256) return 'chat_text';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\u00a7]/u.test(text)) return 'chat_text';
  const normal = text.normalize('NFKC');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\u00a7]/u.test(normal)) return 'chat_text';
  const stripped = normal.replace(LEADING, '');
  const first = [...stripped][0];
  if (first === undefined) return 'chat_text';
  if (SLASHES.has(first) || SLASHES.has(first.normalize('NFKD')[0])) return 'chat_command';
  return null;
}

/** The Minecraft name (`oak_log`) of a canonical `minecraft:` id, or null for anything else. */
export function minecraftName(id) {
  const m = /^minecraft:([a-z0-9_]{1,58})$/.exec(typeof id === 'string' ? id : '');
  return m ? m[1] : null;
}

/** The v1 equipment slot as Mineflayer names its destination. */
export const DESTINATIONS = { mainhand: 'hand', offhand: 'off-hand', head: 'head', chest: 'torso', legs: 'legs', feet: 'feet' };

/** The unit vector of a face. */
export const FACES = {
  up: [0, 1, 0], down: [0, -1, 0], north: [0, 0, -1], south: [0, 0, 1], east: [1, 0, 0], west: [-1, 0, 0],
};
