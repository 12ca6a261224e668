// The connector's own checks of a command before it touches the world: the same rules
// Helix applies before queuing, applied again here (a connector never trusts that only
// Helix talks to it), plus the ids and slots of this game.

/** The SHA-256 of the admitted action schema this connector was built against (what
 * `helix connector-sim --print-schema-hash` prints; a test compares the two). */
export const SCHEMA_HASH = '1a9914a9d4b684b08d4fc4665b04c4cf203d6ad960f9e5f563f18533d9f1f2d9';

/** The v1 step types this connector executes. `craft` is left out: the test world
 * (flying-squid) has no crafting, so it cannot be proven here (docs/embodiment.md). */
export const CAPABILITIES = ['move_to', 'look_at', 'stop', 'break_block', 'place_block', 'equip', 'chat', 'wait'];

/** Steps that change the world (an interrupted one may have happened). */
export const MUTATING = new Set(['break_block', 'place_block', 'craft', 'equip', 'chat']);

/** The survival reach of a player, in blocks from the eyes to the block's centre. */
export const REACH = 4.5;

/** The longest chat line, in characters (vanilla's limit). */
export const MAX_CHAT_CHARS = 256;

/** The characters that read as `/` at the start of a line (Helix's list: every character whose
 * confusable skeleton or NFKC form begins with `/`, and the combining solidus overlays). */
export const SLASH_LIKE = [
  0x002f, 0x0337, 0x0338, 0x1735, 0x2041, 0x2044, 0x2215, 0x2571, 0x27cb, 0x29f6, 0x29f8, 0x2afb,
  0x2afd, 0x2cc6, 0x2cc7, 0x2f03, 0x3033, 0x30ce, 0x31d2, 0x31d3, 0x4e3f, 0xff0f, 0xff89, 0x1d23a,
];

/** Unicode's Default_Ignorable_Code_Point, as ranges (stripped at the start of a line). */
export const DEFAULT_IGNORABLE = [
  [0x00ad, 0x00ad], [0x034f, 0x034f], [0x061c, 0x061c], [0x115f, 0x1160], [0x17b4, 0x17b5],
  [0x180b, 0x180f], [0x200b, 0x200f], [0x202a, 0x202e], [0x2060, 0x206f], [0x3164, 0x3164],
  [0xfe00, 0xfe0f], [0xfeff, 0xfeff], [0xffa0, 0xffa0], [0xfff0, 0xfff8], [0x1bca0, 0x1bca3],
  [0x1d173, 0x1d17a], [0xe0000, 0xe0fff],
];

const SLASHES = new Set(SLASH_LIKE);
const blankClass = /^[\p{White_Space}\p{Cc}\p{Cf}]$/u;
/** A character stripped from the start of a line: White_Space, Cc, Cf, a
 * Default_Ignorable_Code_Point or the blank braille pattern U+2800. */
function blankAtStart(cp) {
  return blankClass.test(String.fromCodePoint(cp)) || cp === 0x2800
    || DEFAULT_IGNORABLE.some(([lo, hi]) => cp >= lo && cp <= hi);
}
const controlClass = /^\p{Cc}$/u;
/** No character vanilla refuses in chat (`§`, below U+0020, DEL) and no control character. */
function clean(s) {
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (cp === 0xa7 || cp < 0x20 || cp === 0x7f || controlClass.test(ch)) return false;
  }
  return true;
}

/**
 * The chat rule, exactly as Helix applies it (docs/embodiment.md, and
 * docs/connector-protocol/chat-rule.json which the tests check this against): NFKC, then the
 * blank start stripped; a leading `/` or look-alike is `chat_command`; an empty line, more
 * than 256 characters, or a refused character in the text or the delivered line is
 * `chat_text`. Answers `{ text }` (the line to send) or `{ refused }`.
 */
export function chatRule(text) {
  if (typeof text !== 'string') return { refused: 'chat_text' };
  const cps = [...text.normalize('NFKC')].map((c) => c.codePointAt(0));
  let at = 0;
  while (at < cps.length && blankAtStart(cps[at])) at += 1;
  const delivered = String.fromCodePoint(...cps.slice(at));
  if (at < cps.length && SLASHES.has(cps[at])) return { refused: 'chat_command' };
  const n = cps.length - at;
  if (n === 0 || n > MAX_CHAT_CHARS || !clean(text) || !clean(delivered)) return { refused: 'chat_text' };
  return { text: delivered };
}

/** Why a chat line must not be sent (`chat_command`, `chat_text`), or null. */
export function chatRefusal(text) {
  return chatRule(text).refused ?? null;
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
