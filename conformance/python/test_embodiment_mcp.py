"""The five player-embodiment tools (and Device Check) on `/mcp`, driven by the official MCP
Python SDK against a real `helix serve`, with a connector on the southbound routes: a
scripted one (each workflow state on purpose) and the reference `helix connector-sim`.
Every result, success or error, is validated against the outputSchema `tools/list`
published for that tool (jsonschema, Draft 2020-12).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import anyio
import jsonschema
import pytest

from helix_server import SUBJECT, TENANT, HelixServer, helix_bin
from test_mcp_conformance import mcp_session, structured

pytestmark = pytest.mark.anyio

EMBODIMENT_SCOPE = ("helix.rooms.read helix.rooms.manage helix.environment_actions.read "
                    "helix.environment_actions.write")
STEVE = "sim-native-steve"
CAPABILITIES = ["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"]


def prepare(server: HelixServer) -> None:
    server.tokens["embodiment"] = server.mint(EMBODIMENT_SCOPE)
    subprocess.run(
        [str(helix_bin()), "account", "policy", "--data-dir", str(server.data_dir),
         "--subject", SUBJECT, "--tenant", TENANT, "--developer", "true"],
        capture_output=True, timeout=60, check=True,
    )
    out = subprocess.run(
        [str(helix_bin()), "dev-session", "--data-dir", str(server.data_dir), "--subject", SUBJECT,
         "--tenant", TENANT],
        capture_output=True, timeout=60, check=True,
    )
    server.tokens["cookie"] = f"helix_session={out.stdout.decode().strip()}"


@pytest.fixture
def embodied():
    server = HelixServer()
    server.start(prepare=prepare)
    try:
        yield server
    finally:
        server.stop()


def http(server: HelixServer, method: str, path: str, body: Any = None, *, bearer: str | None = None,
         cookie: str | None = None, key: str | None = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{server.base_url}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if bearer:
        req.add_header("Authorization", f"Bearer {bearer}")
    if cookie:
        req.add_header("Cookie", cookie)
        req.add_header("Origin", server.base_url)
        req.add_header("Sec-Fetch-Site", "same-origin")
    if key:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, json.loads(res.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def paired_room(server: HelixServer) -> dict[str, Any]:
    """A room of the developer and an action connector paired for it in the browser lane."""
    token = server.tokens["embodiment"]
    status, room = http(server, "POST", "/api/v1/rooms", {"name": "Embodied"}, bearer=token,
                        key=f"sdk-room-{uuid.uuid4().hex}")
    assert status in (200, 201), room
    status, pairing = http(server, "POST", "/api/account/room-connectors/pairings",
                           {"room_id": room["room_id"], "world_id": "overworld"}, cookie=server.tokens["cookie"])
    assert status == 201, pairing
    return {"room_id": room["room_id"], "binding_id": pairing["environment_binding_id"],
            "credential": pairing["connector_credential"], "config": pairing.get("connector_config")}


class Tools:
    """An SDK session whose every call is checked against the tool's published outputSchema."""

    def __init__(self, session: Any, raw_tools: list[dict[str, Any]]) -> None:
        self.session = session
        self.schemas = {t["name"]: t["outputSchema"] for t in raw_tools}
        self.seen: dict[str, set[str]] = {}

    async def call(self, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        result = await self.session.call_tool(name, args)
        sc = structured(result)
        jsonschema.Draft202012Validator(self.schemas[name]).validate(sc)
        label = sc["error"]["code"] if result.is_error else sc.get("status", sc.get("schema", "ok"))
        self.seen.setdefault(name, set()).add(label)
        if result.is_error:
            assert sc["schema"] == "helix.agent_api.error.v1", sc
        else:
            for flag in ("answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included"):
                assert sc.get(flag) is False, (name, flag, sc)
        return bool(result.is_error), sc


def connector(server: HelixServer, credential: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, v = http(server, "POST", f"/api/connectors/v1/{path}", body, bearer=credential)
    assert status == 200, (path, status, v)
    return v


def ack(cmd: dict[str, Any], seq: int, status: str, observation: Any = None) -> dict[str, Any]:
    return {"workflow_ref": cmd["workflow_ref"], "lease_token": cmd["lease_token"], "step_index": cmd["step_index"],
            "seq": seq, "status": status, "observation": observation}


async def open_tools(server: HelixServer):
    cm = mcp_session(server.mcp_url, server.tokens["embodiment"])
    session, wire = await cm.__aenter__()
    await session.list_tools()
    raw = next(m for m in wire if "tools" in m.get("result", {}))["result"]["tools"]
    return cm, Tools(session, raw)


async def select_first(tools: Tools, w: dict[str, Any]) -> None:
    _, listing = await tools.call("helix_environment_subject_list", {"room_id": w["room_id"]})
    assert STEVE not in json.dumps(listing) and w["credential"] not in json.dumps(listing)
    subject = listing["environments"][0]["subjects"][0]["subject_ref"]
    is_error, sel = await tools.call("helix_environment_subject_select", {
        "room_id": w["room_id"], "environment_binding_id": w["binding_id"], "subject_ref": subject})
    assert not is_error, sel


async def test_every_workflow_state_and_error_matches_the_published_output_schema(embodied: HelixServer) -> None:
    w = paired_room(embodied)
    cred = w["credential"]
    reg = connector(embodied, cred, "register", {
        "protocol": "helix.connector.v1",
        "manifest": {"connector_name": "scripted", "connector_version": "1.0.0", "world_id": "overworld"},
        "schema_hash": (await _schema_hash(embodied)),
        "capabilities": CAPABILITIES,
        "subjects": [{"native_id": STEVE, "display_name": "Steve", "online": True}],
    })
    epoch = reg["epoch"]
    cm, tools = await open_tools(embodied)
    try:
        assert {"helix_environment_subject_list", "helix_environment_subject_select", "helix_minecraft_player_action",
                "helix_minecraft_workflow_status", "helix_minecraft_workflow_control",
                "helix_environment_device_check"} <= set(tools.schemas)
        await tools.call("helix_environment_device_check", {})
        # Before selecting: a typed error result.
        is_error, e = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}",
            "action": {"type": "wait", "ticks": 5}})
        assert is_error and e["error"]["code"] == "subject_not_selected", e
        is_error, e = await tools.call("helix_environment_subject_select", {
            "room_id": w["room_id"], "environment_binding_id": w["binding_id"], "subject_ref": "sub_" + "0" * 20})
        assert is_error, e
        await select_first(tools, w)

        move = {"type": "move_to", "x": 3, "y": 64, "z": 1}
        is_error, wf = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}", "action": move})
        assert not is_error and wf["status"] == "queued" and wf["poll_after_ms"] > 0, wf
        ref = {"room_id": w["room_id"], "workflow_ref": wf["workflow_ref"]}
        assert (await tools.call("helix_minecraft_workflow_status", ref))[1]["status"] == "queued"

        [cmd] = connector(embodied, cred, "poll", {"epoch": epoch, "acks": []})["commands"]
        assert (await tools.call("helix_minecraft_workflow_status", ref))[1]["status"] == "dispatched"
        connector(embodied, cred, "poll", {"epoch": epoch, "acks": [ack(cmd, 1, "accepted")]})
        assert (await tools.call("helix_minecraft_workflow_status", ref))[1]["status"] == "running"
        connector(embodied, cred, "poll", {"epoch": epoch, "acks": [ack(cmd, 2, "completed", {"position": [3, 64, 1]})]})
        _, done = await tools.call("helix_minecraft_workflow_status", ref)
        assert done["status"] == "succeeded" and done["poll_after_ms"] is None, done

        # A person takes the controls: paused, then resumed.
        is_error, wf = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}",
            "action": {"type": "wait", "ticks": 100}})
        ref2 = {"room_id": w["room_id"], "workflow_ref": wf["workflow_ref"]}
        [cmd] = connector(embodied, cred, "poll", {"epoch": epoch, "acks": []})["commands"]
        connector(embodied, cred, "poll", {"epoch": epoch, "acks": [ack(cmd, 1, "overridden")]})
        assert (await tools.call("helix_minecraft_workflow_status", ref2))[1]["status"] == "paused"
        is_error, resumed = await tools.call("helix_minecraft_workflow_control", {**ref2, "control": "resume"})
        assert not is_error and resumed["status"] != "paused", resumed
        is_error, cancelled = await tools.call("helix_minecraft_workflow_control", {**ref2, "control": "cancel"})
        assert not is_error and cancelled["status"] in ("cancelled", "cancel_requested"), cancelled

        # Emergency Stop: stopped, and new actions are a typed refusal.
        is_error, wf = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}",
            "action": {"type": "wait", "ticks": 100}})
        is_error, stopped = await tools.call("helix_minecraft_workflow_control", {
            "room_id": w["room_id"], "workflow_ref": wf["workflow_ref"], "control": "emergency_stop"})
        assert not is_error and stopped["status"] == "stopped", stopped
        is_error, e = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}",
            "action": {"type": "wait", "ticks": 1}})
        assert is_error and e["error"]["code"] == "emergency_stop_active", e
        is_error, e = await tools.call("helix_minecraft_workflow_status",
                                       {"room_id": w["room_id"], "workflow_ref": "wf_" + "0" * 20})
        assert is_error, e
    finally:
        await cm.__aexit__(None, None, None)
    statuses = tools.seen["helix_minecraft_workflow_status"]
    assert {"queued", "dispatched", "running", "succeeded", "paused"} <= statuses, statuses
    assert len(tools.seen) == 6, tools.seen


async def _schema_hash(server: HelixServer) -> str:
    """The admitted action schema's hash, as `helix connector-sim` registers it."""
    out = subprocess.run([str(helix_bin()), "connector-sim", "--print-schema-hash"], capture_output=True, timeout=30)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.decode().strip()
    pytest.skip("the helix binary cannot print the action schema hash")


async def test_connector_sim_drives_a_move_to_succeeded_over_the_sdk(embodied: HelixServer, tmp_path) -> None:
    w = paired_room(embodied)
    config = {"protocol": "helix.connector.v1", "base_url": embodied.base_url,
              "environment_binding_id": w["binding_id"], "room_id": w["room_id"], "world_id": "overworld",
              "credential_env": "HELIX_CONNECTOR_CREDENTIAL", "poll_interval_ms": 100}
    path = tmp_path / "connector.json"
    path.write_text(json.dumps(config))
    sim = subprocess.Popen(
        [str(helix_bin()), "connector-sim", "--config", str(path), "--interval-ms", "100", "--polls", "200"],
        env={**os.environ, "HELIX_CONNECTOR_CREDENTIAL": w["credential"]},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    cm, tools = await open_tools(embodied)
    try:
        for _ in range(50):
            _, listing = await tools.call("helix_environment_subject_list", {"room_id": w["room_id"]})
            if listing["environments"] and listing["environments"][0]["subjects"]:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the simulator never registered")
        _, listing = await tools.call("helix_environment_subject_list", {"room_id": w["room_id"]})
        subject = listing["environments"][0]["subjects"][0]["subject_ref"]
        is_error, sel = await tools.call("helix_environment_subject_select", {
            "room_id": w["room_id"], "environment_binding_id": w["binding_id"], "subject_ref": subject})
        assert not is_error, sel
        sequence = {"type": "sequence", "steps": [
            {"type": "move_to", "x": 5, "y": 64, "z": 4},
            {"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"},
            {"type": "chat", "text": "done"}]}
        is_error, wf = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-sim-{uuid.uuid4().hex}", "action": sequence})
        assert not is_error and wf["status"] == "queued", wf
        ref = {"room_id": w["room_id"], "workflow_ref": wf["workflow_ref"]}
        last: dict[str, Any] = {}
        for _ in range(100):
            _, last = await tools.call("helix_minecraft_workflow_status", ref)
            if last["status"] not in ("queued", "dispatched", "running", "verifying"):
                break
            time.sleep(0.1)
        assert last["status"] == "succeeded", last
        assert last["budget"]["steps_done"] == 3, last
        _, again = await tools.call("helix_minecraft_workflow_control", {**ref, "control": "cancel"})
        assert again["status"] == "succeeded", again
    finally:
        await cm.__aexit__(None, None, None)
        sim.terminate()
        sim.wait(timeout=10)


STEP_DEADLINE_S = 30  # core/src/service/embodiment/mod.rs, STEP_DEADLINE_MS


class Scripted:
    """The scripted connector's polls: every ack applied unless told otherwise."""

    def __init__(self, server: HelixServer, credential: str, epoch: int) -> None:
        self.server, self.credential, self.epoch = server, credential, epoch

    def poll(self, acks: list[dict[str, Any]] | None = None, expect: str = "applied") -> dict[str, Any]:
        v = connector(self.server, self.credential, "poll", {"epoch": self.epoch, "acks": acks or []})
        assert all(a["outcome"] == expect for a in v["acks"]), v["acks"]
        return v

    def command_for(self, ref: str) -> dict[str, Any]:
        v = self.poll()
        cmds = [c for c in v["commands"] if c["workflow_ref"] == ref]
        assert cmds, (ref, v)
        return cmds[0]


async def test_failures_cancellation_unknown_outcomes_epochs_and_deadlines_match_the_output_schema(
        embodied: HelixServer) -> None:
    w = paired_room(embodied)
    cred = w["credential"]
    subjects = [{"native_id": STEVE, "display_name": "Steve", "online": True}]
    register = {"protocol": "helix.connector.v1",
                "manifest": {"connector_name": "scripted", "connector_version": "1.0.0", "world_id": "overworld"},
                "schema_hash": (await _schema_hash(embodied)), "capabilities": CAPABILITIES, "subjects": subjects}
    conn = Scripted(embodied, cred, connector(embodied, cred, "register", register)["epoch"])
    cm, tools = await open_tools(embodied)

    async def queue(action: dict[str, Any]) -> str:
        is_error, wf = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}", "action": action})
        assert not is_error and wf["status"] == "queued", wf
        return wf["workflow_ref"]

    async def status(ref: str, want: str, reason: str | None = None) -> dict[str, Any]:
        _, s = await tools.call("helix_minecraft_workflow_status", {"room_id": w["room_id"], "workflow_ref": ref})
        assert s["status"] == want and (reason is None or s["reason"] == reason), s
        return s

    async def control(ref: str, c: str) -> tuple[bool, dict[str, Any]]:
        return await tools.call("helix_minecraft_workflow_control",
                                {"room_id": w["room_id"], "workflow_ref": ref, "control": c})

    here = {"position": [0, 64, 0]}
    try:
        await select_first(tools, w)
        # failed: postcondition_unmet ("completed", but the observation shows the log still there).
        ref = await queue({"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"})
        cmd = conn.command_for(ref)
        conn.poll([ack(cmd, 1, "completed", {"block_at_target": "minecraft:oak_log"})])
        await status(ref, "failed", "postcondition_unmet")
        # verifying: sent, its effect not readable yet ("completed" without an observation);
        # the echo on a later "completed" decides.
        ref = await queue({"type": "chat", "text": "hello"})
        cmd = conn.command_for(ref)
        conn.poll([ack(cmd, 1, "accepted"), ack(cmd, 2, "completed")])
        s = await status(ref, "verifying")
        assert s["late_effects_possible"] is True and s["poll_after_ms"] > 0, s
        assert all(c["workflow_ref"] != ref for c in conn.poll()["commands"]), "not delivered again"
        conn.poll([ack(cmd, 3, "completed", {"chat_echo": "hello"})])
        await status(ref, "succeeded")
        # failed: step_failed:<reason>.
        ref = await queue({"type": "craft", "item": "minecraft:oak_planks", "times": 1})
        cmd = conn.command_for(ref)
        conn.poll([ack(cmd, 1, "accepted"), {**ack(cmd, 2, "failed"), "reason": "missing_ingredients"}])
        await status(ref, "failed", "step_failed:missing_ingredients")
        # rejected: the connector refuses the first step instead of accepting it (the world untouched).
        ref = await queue({"type": "equip", "item": "minecraft:diamond_sword", "slot": "mainhand"})
        cmd = conn.command_for(ref)
        conn.poll([{**ack(cmd, 1, "rejected"), "reason": "not_in_inventory"}])
        s = await status(ref, "rejected", "not_in_inventory")
        assert s["late_effects_possible"] is False and s["poll_after_ms"] is None, s
        conn.poll([ack(cmd, 2, "completed", {"equipped": "minecraft:diamond_sword"})], expect="not_at_connector")
        assert all(c["workflow_ref"] != ref for c in conn.poll()["commands"])
        is_error, e = await control(ref, "resume")
        assert is_error and e["error"]["code"] == "workflow_not_resumable", e
        # A later step refused: failed: step_rejected:<reason> (the earlier step did run).
        ref = await queue({"type": "sequence", "steps": [
            {"type": "wait", "ticks": 5}, {"type": "equip", "item": "minecraft:diamond_sword", "slot": "mainhand"}]})
        first = conn.command_for(ref)
        conn.poll([ack(first, 1, "completed", here)])
        second = conn.command_for(ref)
        assert second["step_index"] == 1, second
        conn.poll([{**ack(second, 1, "rejected"), "reason": "not_in_inventory"}])
        await status(ref, "failed", "step_rejected:not_in_inventory")
        # rejected at dispatch: the owner narrowed the region after the action was queued.
        ref = await queue({"type": "move_to", "x": 20, "y": 64, "z": 0})
        region = f"/api/account/room-connectors/{w['binding_id']}/region"
        code, r = http(embodied, "POST", region, {"room_id": w["room_id"], "min": {"x": -10, "y": 0, "z": -10},
                                                  "max": {"x": 10, "y": 100, "z": 10}}, cookie=embodied.tokens["cookie"])
        assert code == 200 and r["schema"] == "helix.room_connector_region.v1", r
        assert all(c["workflow_ref"] != ref for c in conn.poll()["commands"])
        s = await status(ref, "rejected", "out_of_region")
        assert s["late_effects_possible"] is False, s
        code, r = http(embodied, "POST", region, {"room_id": w["room_id"], "clear": True},
                       cookie=embodied.tokens["cookie"])
        assert code == 200 and r["region"] is None, r
        # A sequence: the next step under a fresh lease; the old lease's ack is refused.
        ref = await queue({"type": "sequence", "steps": [{"type": "wait", "ticks": 5}, {"type": "chat", "text": "hi"}]})
        first = conn.command_for(ref)
        conn.poll([ack(first, 1, "completed", here)])
        assert (await status(ref, "dispatched"))["step"] == 1
        second = conn.command_for(ref)
        assert second["lease_token"] != first["lease_token"]
        conn.poll([ack(first, 2, "completed", here)], expect="lease_mismatch")
        conn.poll([ack(second, 1, "completed", {"chat_echo": "hi"})])
        assert (await status(ref, "succeeded"))["budget"]["steps_done"] == 2
        # cancel: queued -> cancelled at once (idempotent); at the connector -> cancel_requested -> cancelled.
        ref = await queue({"type": "wait", "ticks": 10})
        for _ in range(2):
            is_error, c = await control(ref, "cancel")
            assert not is_error and c["status"] == "cancelled", c
        ref = await queue({"type": "wait", "ticks": 100})
        cmd = conn.command_for(ref)
        conn.poll([ack(cmd, 1, "accepted")])
        is_error, c = await control(ref, "cancel")
        assert not is_error and c["status"] == "cancel_requested" and c["late_effects_possible"] is True, c
        assert ref in conn.poll()["cancel"]
        conn.poll([ack(cmd, 2, "completed", here)])
        await status(ref, "cancelled")
        is_error, e = await control(ref, "resume")
        assert is_error and e["error"]["code"] == "workflow_not_resumable", e
        # outcome_unknown: a mutating step interrupted at the connector, never delivered again.
        ref = await queue({"type": "place_block", "x": 8, "y": 64, "z": 8, "item": "minecraft:dirt", "face": "up"})
        cmd = conn.command_for(ref)
        conn.poll([ack(cmd, 1, "accepted"), ack(cmd, 2, "interrupted")])
        await status(ref, "outcome_unknown", "interrupted")
        assert all(c["workflow_ref"] != ref for c in conn.poll()["commands"])
        # A new registration pauses what the old epoch held; a poll of the old epoch is refused whole.
        ref = await queue({"type": "wait", "ticks": 100})
        cmd = conn.command_for(ref)
        conn.poll([ack(cmd, 1, "accepted")])
        old = conn.epoch
        conn.epoch = connector(embodied, cred, "register", register)["epoch"]
        assert conn.epoch == old + 1
        await status(ref, "paused", "connector_epoch_changed")
        code, body = http(embodied, "POST", "/api/connectors/v1/poll",
                          {"epoch": old, "acks": [ack(cmd, 2, "completed", here)]}, bearer=cred)
        assert code == 409 and body["error"]["code"] == "connector_epoch_stale", body
        assert body["error"]["details"]["current_epoch"] == conn.epoch
        is_error, r = await control(ref, "resume")
        assert not is_error and r["status"] == "queued", r
        conn.poll([ack(conn.command_for(ref), 1, "completed", here)])
        await status(ref, "succeeded")
        # Past the step deadline: timed_out (a wait), outcome_unknown (a running mutation).
        slow = await queue({"type": "wait", "ticks": 200})
        slow_mut = await queue({"type": "break_block", "x": 6, "y": 64, "z": 5,
                                "expected_block": "minecraft:oak_log"})
        started = time.monotonic()
        cmds = [c for c in conn.poll()["commands"] if c["workflow_ref"] in (slow, slow_mut)]
        assert len(cmds) == 2, cmds
        conn.poll([ack(c, 1, "accepted") for c in cmds])
        await anyio.sleep(max(0.0, STEP_DEADLINE_S + 1.5 - (time.monotonic() - started)))
        overdue = conn.poll()
        assert slow in overdue["cancel"] and slow_mut in overdue["cancel"], overdue
        await status(slow, "timed_out", "step_deadline_passed")
        await status(slow_mut, "outcome_unknown", "step_deadline_passed")
    finally:
        await cm.__aexit__(None, None, None)
    statuses = tools.seen["helix_minecraft_workflow_status"]
    assert {"failed", "dispatched", "verifying", "succeeded", "cancelled", "outcome_unknown", "paused", "timed_out",
            "rejected"} <= statuses
    assert {"cancelled", "cancel_requested", "workflow_not_resumable", "queued"} <= tools.seen[
        "helix_minecraft_workflow_control"]


async def test_a_workflow_never_dispatched_within_the_queue_time_is_expired() -> None:
    """The queue time is the operator's HELIX_EMBODIMENT_QUEUE_TTL_SECS (2 s here, 600 by default)."""
    server = HelixServer(env={"HELIX_EMBODIMENT_QUEUE_TTL_SECS": "2"})
    server.start(prepare=prepare)
    try:
        w = paired_room(server)
        register = {"protocol": "helix.connector.v1",
                    "manifest": {"connector_name": "scripted", "connector_version": "1.0.0", "world_id": "overworld"},
                    "schema_hash": (await _schema_hash(server)), "capabilities": CAPABILITIES,
                    "subjects": [{"native_id": STEVE, "display_name": "Steve", "online": True}]}
        conn = Scripted(server, w["credential"], connector(server, w["credential"], "register", register)["epoch"])
        cm, tools = await open_tools(server)
        try:
            await select_first(tools, w)
            is_error, wf = await tools.call("helix_minecraft_player_action", {
                "room_id": w["room_id"], "idempotency_key": f"sdk-act-{uuid.uuid4().hex}",
                "action": {"type": "wait", "ticks": 5}})
            assert not is_error and wf["status"] == "queued", wf
            ref = {"room_id": w["room_id"], "workflow_ref": wf["workflow_ref"]}
            await anyio.sleep(3.2)  # no poll in between; whole seconds are compared
            _, s = await tools.call("helix_minecraft_workflow_status", ref)
            assert (s["status"], s["reason"], s["poll_after_ms"]) == ("expired", "not_dispatched_in_time", None), s
            assert s["late_effects_possible"] is False, s
            assert all(c["workflow_ref"] != wf["workflow_ref"] for c in conn.poll()["commands"]), "never dispatched"
            is_error, c = await tools.call("helix_minecraft_workflow_control", {**ref, "control": "cancel"})
            assert not is_error and c["status"] == "expired", c
            is_error, e = await tools.call("helix_minecraft_workflow_control", {**ref, "control": "resume"})
            assert is_error and e["error"]["code"] == "workflow_not_resumable", e
        finally:
            await cm.__aexit__(None, None, None)
        assert "expired" in tools.seen["helix_minecraft_workflow_status"]
    finally:
        server.stop()


async def test_connector_sim_taken_over_by_a_person_pauses_until_resume(embodied: HelixServer, tmp_path) -> None:
    """`kill -USR1` on `helix connector-sim`: a person takes the controls at its next poll."""
    w = paired_room(embodied)
    path = tmp_path / "connector.json"
    path.write_text(json.dumps(w["config"]))
    sim = subprocess.Popen(
        [str(helix_bin()), "connector-sim", "--config", str(path), "--interval-ms", "100"],
        env={**os.environ, "HELIX_CONNECTOR_CREDENTIAL": w["credential"]},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    cm, tools = await open_tools(embodied)

    async def until(ref: str, passing: tuple[str, ...]) -> dict[str, Any]:
        for _ in range(200):
            _, s = await tools.call("helix_minecraft_workflow_status", {"room_id": w["room_id"], "workflow_ref": ref})
            if s["status"] not in passing:
                return s
            await anyio.sleep(0.05)
        return s

    try:
        for _ in range(100):
            _, listing = await tools.call("helix_environment_subject_list", {"room_id": w["room_id"]})
            if listing["environments"] and listing["environments"][0]["subjects"]:
                break
            await anyio.sleep(0.1)
        await select_first(tools, w)
        is_error, wf = await tools.call("helix_minecraft_player_action", {
            "room_id": w["room_id"], "idempotency_key": f"sdk-sim-{uuid.uuid4().hex}",
            "action": {"type": "wait", "ticks": 200}})
        assert not is_error, wf
        ref = wf["workflow_ref"]
        assert (await until(ref, ("queued", "dispatched")))["status"] == "running"
        sim.send_signal(signal.SIGUSR1)
        s = await until(ref, ("running",))
        assert (s["status"], s["reason"]) == ("paused", "manual_override"), s
        is_error, r = await tools.call("helix_minecraft_workflow_control",
                                       {"room_id": w["room_id"], "workflow_ref": ref, "control": "resume"})
        assert not is_error and r["status"] == "queued", r
        s = await until(ref, ("queued", "dispatched", "running", "verifying"))
        assert s["status"] == "succeeded", s
    finally:
        await cm.__aexit__(None, None, None)
        sim.terminate()
        out, _ = sim.communicate(timeout=10)
    assert b"a person took the controls: wf_" in out, out
    assert w["credential"].encode() not in out
