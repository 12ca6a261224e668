// Player embodiment helpers for the TypeScript SDK suite: a developer's room with an action
// connector paired through the same-origin cookie route, the southbound connector routes
// over real HTTP, and an SDK session whose every result (success or error) is validated
// against the outputSchema `tools/list` published for that tool (ajv, draft 2020-12).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { helixBin, mintToken, SUBJECT, TENANT } from './helix-server.mjs';
import { call, connect, FALSE_FLAGS, key } from './helix-mcp.mjs';

export const EMBODIMENT_SCOPE =
  'helix.rooms.read helix.rooms.manage helix.environment_actions.read helix.environment_actions.write';
export const EMBODIMENT_TOOLS = [
  'helix_environment_subject_list',
  'helix_environment_subject_select',
  'helix_minecraft_player_action',
  'helix_minecraft_workflow_status',
  'helix_minecraft_workflow_control',
  'helix_environment_device_check',
];
export const CAPABILITIES = ['move_to', 'look_at', 'stop', 'break_block', 'place_block', 'equip', 'craft', 'chat', 'wait'];

const helix = (args) => execFileSync(helixBin(), args, { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });

/** The `prepare` step of `withHelix`: an embodiment token, the developer flag, a browser session. */
export function prepareEmbodiment({ dataDir, tokens }) {
  tokens.embodiment = mintToken(dataDir, EMBODIMENT_SCOPE);
  helix(['account', 'policy', '--data-dir', dataDir, '--subject', SUBJECT, '--tenant', TENANT, '--developer', 'true']);
  tokens.cookie = `helix_session=${helix(['dev-session', '--data-dir', dataDir, '--subject', SUBJECT, '--tenant', TENANT]).trim()}`;
}

/** The admitted action schema's hash, as `helix connector-sim` registers it. */
export const schemaHash = () => helix(['connector-sim', '--print-schema-hash']).trim();

/** One HTTP request: `{ status, body }`; bearer, or the cookie with a same-origin browser's headers. */
export async function http(h, method, path, body, { bearer, cookie, idem } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (cookie) Object.assign(headers, { cookie, origin: h.baseUrl, 'sec-fetch-site': 'same-origin' });
  if (idem) headers['idempotency-key'] = idem;
  const res = await fetch(`${h.baseUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

/** A room of the developer and an action connector paired for it (the pairing page's JSON route). */
export async function pairedRoom(h, name = 'Embodied') {
  const room = await http(h, 'POST', '/api/v1/rooms', { name }, { bearer: h.tokens.embodiment, idem: key('room') });
  assert.equal(room.status, 201, JSON.stringify(room.body));
  const pairing = await http(h, 'POST', '/api/account/room-connectors/pairings',
    { room_id: room.body.room_id, world_id: 'overworld' }, { cookie: h.tokens.cookie });
  assert.equal(pairing.status, 201, JSON.stringify(pairing.body));
  assert.match(pairing.body.connector_credential, /^hac_[0-9a-f]{64}$/);
  return {
    roomId: room.body.room_id,
    bindingId: pairing.body.environment_binding_id,
    credential: pairing.body.connector_credential,
    config: pairing.body.connector_config,
  };
}

/** A scripted connector on the southbound routes (`/api/connectors/v1/...`). */
export class ScriptedConnector {
  constructor(h, credential) {
    this.h = h;
    this.credential = credential;
    this.epoch = 0;
  }

  async post(path, body, status = 200) {
    const r = await http(this.h, 'POST', `/api/connectors/v1/${path}`, body, { bearer: this.credential });
    assert.equal(r.status, status, `${path}: ${JSON.stringify(r.body)}`);
    return r.body;
  }

  async register(subjects, hash = schemaHash()) {
    const reg = await this.post('register', {
      protocol: 'helix.connector.v1',
      manifest: { connector_name: 'scripted', connector_version: '1.0.0', world_id: 'overworld' },
      schema_hash: hash,
      capabilities: CAPABILITIES,
      subjects,
    });
    this.epoch = reg.epoch;
    return reg;
  }

  /** One poll carrying `acks`; every ack must be applied unless `expect` says otherwise. */
  async poll(acks = [], expect = 'applied') {
    const r = await this.post('poll', { epoch: this.epoch, acks });
    for (const a of r.acks) assert.equal(a.outcome, expect, `ack outcome: ${JSON.stringify(r.acks)}`);
    return r;
  }

  /** Polls until the command of `workflowRef` is delivered; returns it. */
  async commandFor(workflowRef) {
    const r = await this.poll();
    const cmd = r.commands.find((c) => c.workflow_ref === workflowRef);
    assert.ok(cmd, `no command for ${workflowRef}: ${JSON.stringify(r)}`);
    return cmd;
  }
}

export const ack = (cmd, seq, status, observation = null, reason = null) => ({
  workflow_ref: cmd.workflow_ref, lease_token: cmd.lease_token, step_index: cmd.step_index, seq, status, observation, reason,
});

/**
 * An SDK session (Streamable HTTP, bearer) whose every tool result is checked: its
 * structuredContent validates against the success branch (or, for isError, the error
 * branch) of the tool's published outputSchema, the text block carries the same JSON,
 * and a success has the four false flags. `seen[tool]` collects each status or error code.
 */
export class CheckedTools {
  static async open(h) {
    const { client, wire } = await connect(h.mcpUrl, h.tokens.embodiment);
    const raw = wire.filter((m) => m?.result?.tools).at(-1).result.tools;
    return new CheckedTools(client, raw);
  }

  constructor(client, rawTools) {
    this.client = client;
    this.ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(this.ajv);
    this.validators = {};
    for (const t of rawTools) {
      this.ajv.validateSchema(t.outputSchema);
      assert.equal(this.ajv.errors, null, `${t.name}: outputSchema is not draft 2020-12: ${JSON.stringify(this.ajv.errors)}`);
      const branches = t.outputSchema.anyOf ?? [t.outputSchema];
      this.validators[t.name] = {
        whole: this.ajv.compile(t.outputSchema),
        ok: branches.length === 2 ? this.ajv.compile(branches[0]) : null,
        err: this.ajv.compile(branches.at(-1)),
      };
      assert.equal(this.validators[t.name].whole({}), false, `${t.name}: its outputSchema admits an empty object`);
    }
    this.seen = {};
    this.reasons = new Set();
  }

  names() {
    return Object.keys(this.validators);
  }

  check(name, v, sc, what) {
    assert.ok(v(sc), `${name} ${what} does not match its outputSchema: ${JSON.stringify(v.errors)}\n${JSON.stringify(sc)}`);
  }

  /** Calls `name`; returns `{ isError, sc }` after validating the result. */
  async call(name, args) {
    const result = await call(this.client, name, args);
    const sc = result.structuredContent;
    assert.equal(typeof sc, 'object', `${name}: no structuredContent`);
    const text = (result.content ?? []).find((c) => c.type === 'text');
    assert.deepEqual(JSON.parse(text.text), sc, `${name}: text content differs from structuredContent`);
    const v = this.validators[name];
    this.check(name, v.whole, sc, 'result');
    if (result.isError) {
      this.check(name, v.err, sc, 'error result');
      assert.equal(sc.schema, 'helix.agent_api.error.v1');
    } else {
      if (v.ok) this.check(name, v.ok, sc, 'success result');
      for (const f of FALSE_FLAGS) assert.equal(sc[f], false, `${name}: ${f}`);
    }
    const label = result.isError ? sc.error.code : (sc.status ?? sc.schema);
    (this.seen[name] ??= new Set()).add(label);
    if (!result.isError && sc.reason) this.reasons.add(sc.reason);
    return { isError: Boolean(result.isError), sc };
  }

  async ok(name, args) {
    const r = await this.call(name, args);
    assert.ok(!r.isError, `${name}: ${JSON.stringify(r.sc)}`);
    return r.sc;
  }

  async err(name, args, code) {
    const r = await this.call(name, args);
    assert.ok(r.isError, `${name}: expected ${code}, got ${JSON.stringify(r.sc)}`);
    assert.equal(r.sc.error.code, code, JSON.stringify(r.sc));
    return r.sc;
  }

  close() {
    return this.client.close();
  }
}
