// The live room source lane: with a claimed source bearer (HELIX_SOURCE_CREDENTIAL) and
// the claim page's plugin configuration (--source-config), the connector also reports
// read-only observations of the real world to room-source ingress, as `helix source-sim`
// does with a simulated one: the players online, their positions, the blocks around them
// and their inventories, and it answers inventory probes from the real inventories. This
// lane only reads: nothing it receives leads to an action, and its bearer is never sent
// to the connector routes (nor the connector credential here).
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Vec3 } from 'vec3';

const PROBE = 'com.casimirbot.minecraft.inventory.check';
const TICK_MS = 2000;
const CONFIG_KEYS = ['schema', 'ingress_base_url', 'source_id', 'room_id', 'world_id', 'adapter_profile',
  'adapter_version', 'adapter_hash', 'manifest_hash'];

/** The source lane's settings, or null when it is off; throws a plain message when half-set. */
export function sourceSettings(configPath, env = process.env) {
  const bearer = (env.HELIX_SOURCE_CREDENTIAL ?? '').trim();
  if (!bearer && !configPath) return null;
  if (!bearer || !configPath) throw new Error('the live source needs both HELIX_SOURCE_CREDENTIAL and --source-config');
  if (!/^hsb_[0-9a-f]{64}$/.test(bearer)) throw new Error('HELIX_SOURCE_CREDENTIAL must hold the source bearer (hsb_...) the claim page showed');
  const c = JSON.parse(readFileSync(configPath, 'utf8'));
  if (c?.schema !== 'helix.room_source_plugin_config.v1' || Object.keys(c).some((k) => !CONFIG_KEYS.includes(k))
    || c.adapter_profile !== 'minecraft' || !/^https?:\/\//.test(c.ingress_base_url ?? '')) {
    throw new Error('--source-config is not the claim page\'s minecraft plugin configuration');
  }
  return { bearer, config: c };
}

const ns = (name) => `minecraft:${name}`;

function inventory(bot) {
  const stacks = new Map();
  for (const i of bot.inventory.items()) stacks.set(ns(i.name), (stacks.get(ns(i.name)) ?? 0) + i.count);
  return [...stacks].slice(0, 64).map(([item, count]) => ({ item, count }));
}

/** What the world shows around one online player. */
function playerView(p) {
  const bot = p.bot;
  const pos = p.position();
  const at = (dx, dy, dz) => bot.blockAt(new Vec3(pos[0] + dx, pos[1] + dy, pos[2] + dz))?.name ?? 'unknown';
  return {
    player: p.username,
    position: pos,
    held: bot.heldItem ? ns(bot.heldItem.name) : null,
    below: ns(at(0, -1, 0)),
    around: [[1, 0], [-1, 0], [0, 1], [0, -1]].map(([dx, dz]) => ns(at(dx, -1, dz))),
    inventory: inventory(bot).slice(0, 12),
  };
}

export function startSource({ players, settings, log }) {
  if (!settings) return null;
  const { bearer, config } = settings;
  const epoch = Math.floor(Date.now() / 1000); // monotonic across restarts
  const session = `mc-${epoch}`;
  let n = 0;
  const post = async (path, body) => {
    const res = await fetch(`${config.ingress_base_url}${path}`, {
      method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(10_000),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    });
    const v = await res.json().catch(() => null);
    if (!res.ok) throw new Error(`${path}: ${res.status} ${v?.error?.code ?? ''}`);
    return v;
  };
  const manifest = {
    adapter_profile: config.adapter_profile, adapter_version: config.adapter_version, adapter_hash: config.adapter_hash,
    world_id: config.world_id, manifest_hash: config.manifest_hash, producer_epoch: epoch,
  };
  const online = () => players.filter((p) => p.online && p.bot?.entity);
  const tick = async () => {
    const views = online().map(playerView);
    n += 1;
    const observation = {
      request_id: `${session}-t${n}`, kind: 'snapshot', observed_at: new Date().toISOString(),
      summary: `${config.world_id}: ${views.length} player(s) online${views.map((v) => `; ${v.player} at ${v.position.join(' ')} on ${v.below}`).join('')}`.slice(0, 500),
      data: { players_online: views.length, players: views },
    };
    while (JSON.stringify(observation.data).length > 4000 && observation.data.players.length > 0) observation.data.players.pop();
    await post('/observations', { manifest_hash: config.manifest_hash, producer_epoch: epoch, observations: [observation] });
    const res = await fetch(`${config.ingress_base_url}/probes`, { headers: { authorization: `Bearer ${bearer}` }, signal: AbortSignal.timeout(10_000) });
    const list = res.ok ? await res.json() : { probes: [] };
    for (const probe of list.probes ?? []) {
      if (probe.capability !== PROBE) continue;
      const inv = online().slice(0, 20).map((p) => ({ player: p.username, items: inventory(p.bot) }));
      await post(`/probes/${probe.probe_id}/answer`, {
        manifest_hash: config.manifest_hash, producer_epoch: epoch, request_id: `${session}-p${randomUUID().slice(0, 8)}`,
        observed_at: new Date().toISOString(),
        summary: `${config.world_id}: inventory check, ${inv.length} player(s) online`, inventory: { players: inv },
      }).catch((e) => log(`source: probe ${probe.probe_id} not answered: ${e.message}`));
    }
  };
  let stopped = false;
  (async () => {
    for (;;) {
      try {
        await post('/manifest', manifest);
        log(`source: manifest admitted for ${config.world_id} (producer epoch ${epoch})`);
        break;
      } catch (e) {
        log(`source: ${e.message}`);
        if (/ 4\d\d /.test(`${e.message} `)) return; // refused: retrying cannot fix it
        await new Promise((r) => setTimeout(r, TICK_MS));
      }
    }
    while (!stopped) {
      await tick().catch((e) => log(`source: ${e.message}`));
      await new Promise((r) => setTimeout(r, TICK_MS));
    }
  })();
  return { stop: () => { stopped = true; } };
}
