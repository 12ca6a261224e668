#!/usr/bin/env python3
"""The player-embodiment benchmark: N simulated action connectors polling one `helix serve`.

    HELIX_BIN=target/release/helix python3 conformance/bench/embodiment.py [--connectors 50]
        [--interval-ms 500] [--actions 4] [--seconds 30]

Before `serve` starts (the embedded store admits one process at a time) it mints the
owner's token, marks the owner a developer and opens a browser session with the CLI. Then,
against the running server, per connector: a room (REST), a pairing (the cookie route), a
registration with one player, a subject selection (MCP). Each connector is a thread polling
at the interval Helix gives (or --interval-ms) from its own loopback address (127.0.1.x),
as connectors on separate hosts would: the connector lane's per-address limit is not the
bottleneck here. A command is acknowledged `completed` (at its target) on the connector's
next poll, as the reference connector does for a move.

While every connector polls, a driver calls `helix_minecraft_player_action` (a one-step
`move_to`) --actions times per room at spread-out moments, then raises an Emergency Stop
in every room. Printed: polls/s; action-to-dispatch latency (the tool call's answer to the
poll answer carrying the command) p50/p99 in ms and in polls (1 = the connector's next
poll); move_to call-to-succeeded in poll intervals (the tool call's answer, when the workflow
is queued, to the answer of the poll that applied the completion, which is when the workflow is `succeeded`; every workflow's
final status is read back and must be `succeeded`); Emergency Stop to connector halt in
polls (the control call's answer to the first poll answer with `emergency_stop_active`);
and the server's CPU time per poll (from /proc). Only loopback addresses are used; every
loop is bounded in time and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

SUBJECT = "bench-embodiment-owner"
TENANT = "tenant-bench"
SCOPE = ("helix.rooms.read helix.rooms.manage helix.environment_actions.read "
         "helix.environment_actions.write")
CAPABILITIES = ["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"]
# The setup's many calls from one principal: lifted for the bench only (not the connector lane).
LIFTED = {name: "100000" for name in (
    "HELIX_MCP_IP_RATE_LIMIT", "HELIX_MCP_PRINCIPAL_RATE_LIMIT", "HELIX_ROOM_AGENT_IP_RATE_LIMIT",
    "HELIX_ROOM_AGENT_PRINCIPAL_RATE_LIMIT", "HELIX_ROOM_SOURCE_BROWSER_IP_RATE_LIMIT",
    "HELIX_ROOM_SOURCE_BROWSER_ACCOUNT_RATE_LIMIT", "HELIX_AGENT_IP_RATE_LIMIT",
    "HELIX_AGENT_PRINCIPAL_RATE_LIMIT")}


def cli(helix: str, data: Path, *args: str) -> str:
    out = subprocess.run([helix, *args, "--data-dir", str(data)], capture_output=True, timeout=120, check=True)
    return out.stdout.decode().strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One keep-alive HTTP/1.1 connection from one loopback source address."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.port, self.source = port, source
        self.conn: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body=None, headers: dict[str, str] | None = None):
        data = None if body is None else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                                       source_address=(self.source, 0))
            try:
                self.conn.request(method, path, body=data, headers=h)
                res = self.conn.getresponse()
                raw = res.read()
                return res.status, json.loads(raw or b"{}")
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def tool(c: Client, token: str, name: str, arguments: dict) -> dict:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    status, body = c.call("POST", "/mcp", msg, {
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25"})
    result = body.get("result", {})
    if status != 200 or result.get("isError"):
        raise RuntimeError(f"{name}: {status} {body}")
    return result["structuredContent"]


class Connector(threading.Thread):
    """A scripted connector: polls at its interval, completes each move on its next poll."""

    def __init__(self, i: int, port: int, credential: str, epoch: int, interval_s: float, until: float) -> None:
        super().__init__(daemon=True)
        self.client = Client(port, f"127.0.1.{10 + i}")
        self.credential, self.epoch, self.interval_s, self.until = credential, epoch, interval_s, until
        self.poll_starts: list[float] = []   # when each poll was sent
        self.answers: list[tuple[float, dict]] = []  # (answer received, answer)
        self.seen: dict[str, float] = {}     # workflow_ref -> answer time that carried its command
        self.applied: dict[str, float] = {}  # workflow_ref -> answer time that applied its completion
        self.halted_at: float | None = None
        self.errors: list[str] = []
        self.pending: list[dict] = []
        self.seq: dict[str, int] = {}

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.credential}"}
        while time.monotonic() < self.until:
            started = time.monotonic()
            acks, self.pending = self.pending, []
            self.poll_starts.append(started)
            try:
                status, p = self.client.call("POST", "/api/connectors/v1/poll",
                                             {"epoch": self.epoch, "acks": acks}, headers)
            except OSError as e:
                self.errors.append(f"poll: {e}")
                time.sleep(self.interval_s)
                continue
            now = time.monotonic()
            if status != 200:
                self.errors.append(f"poll {status}: {p}")
            else:
                self.answers.append((now, p))
                for a, sent in zip(p["acks"], acks):
                    if a["outcome"] == "applied" and sent["status"] == "completed":
                        self.applied.setdefault(a["workflow_ref"], now)
                if p["emergency_stop_active"] and self.halted_at is None:
                    self.halted_at = now
                for cmd in p["commands"]:
                    ref = cmd["workflow_ref"]
                    if ref in self.seen:
                        continue  # a redelivery: the ledger answers it
                    self.seen[ref] = now
                    step = cmd["step"]
                    self.seq[ref] = self.seq.get(ref, 0) + 1
                    self.pending.append({
                        "workflow_ref": ref, "lease_token": cmd["lease_token"], "step_index": cmd["step_index"],
                        "seq": self.seq[ref], "status": "completed",
                        "observation": {"position": [step["x"], step["y"], step["z"]]}})
            time.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def polls_until(self, since: float, at: float) -> int:
        """How many polls were sent after `since` up to the one answered at `at` (1: the next)."""
        return sum(1 for s in self.poll_starts if since < s <= at) or 1


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connectors", type=int, default=50)
    ap.add_argument("--interval-ms", type=int, default=None, help="default: the poll_interval_ms Helix gives")
    ap.add_argument("--actions", type=int, default=4, help="move_to actions per room")
    ap.add_argument("--idle-seconds", type=float, default=10.0, help="the idle phase: polls, no actions")
    ap.add_argument("--seconds", type=float, default=30.0, help="the action phase")
    args = ap.parse_args()
    helix = args.helix = os.environ.get("HELIX_BIN", "target/release/helix")
    if not Path(helix).exists():
        print(f"helix binary not found at {helix} (set HELIX_BIN)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="helix-bench-emb-"))
    data = tmp / "data"
    data.mkdir()
    token = cli(helix, data, "dev-token", "--subject", SUBJECT, "--tenant", TENANT, "--scope", SCOPE)
    cli(helix, data, "account", "policy", "--subject", SUBJECT, "--tenant", TENANT, "--developer", "true")
    cookie = "helix_session=" + cli(helix, data, "dev-session", "--subject", SUBJECT, "--tenant", TENANT)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(tmp / "serve.log", "wb")
    server = subprocess.Popen([helix, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", str(data)],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env={**os.environ, **LIFTED})
    try:
        return bench(args, server, port, base, token, cookie)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def bench(args, server: subprocess.Popen, port: int, base: str, token: str, cookie: str) -> int:
    agent = Client(port)
    deadline = time.monotonic() + 60
    while True:
        try:
            if agent.call("GET", "/.well-known/oauth-protected-resource")[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            raise RuntimeError("helix serve did not become ready")
        time.sleep(0.2)
    bearer = {"Authorization": f"Bearer {token}"}
    browser = {"Cookie": cookie, "Origin": base, "Sec-Fetch-Site": "same-origin"}
    schema_hash = None
    rooms = []
    for i in range(args.connectors):
        s, room = agent.call("POST", "/api/v1/rooms", {"name": f"Bench {i}"},
                             {**bearer, "Idempotency-Key": f"bench-room-{uuid.uuid4().hex}"})
        assert s in (200, 201), room
        s, pairing = agent.call("POST", "/api/account/room-connectors/pairings",
                                {"room_id": room["room_id"], "world_id": "overworld"}, browser)
        assert s == 201, pairing
        if schema_hash is None:
            schema_hash = subprocess.run([args.helix, "connector-sim", "--print-schema-hash"], capture_output=True,
                                         check=True, timeout=60).stdout.decode().strip()
        conn = Client(port, f"127.0.1.{10 + i}")
        cred = {"Authorization": f"Bearer {pairing['connector_credential']}"}
        s, reg = conn.call("POST", "/api/connectors/v1/register", {
            "protocol": "helix.connector.v1",
            "manifest": {"connector_name": "bench", "connector_version": "1.0.0", "world_id": "overworld"},
            "schema_hash": schema_hash, "capabilities": CAPABILITIES,
            "subjects": [{"native_id": f"bench-player-{i}", "display_name": f"Player{i}", "online": True}]}, cred)
        assert s == 200, reg
        listed = tool(agent, token, "helix_environment_subject_list", {"room_id": room["room_id"]})
        env = listed["environments"][0]
        tool(agent, token, "helix_environment_subject_select", {
            "room_id": room["room_id"], "environment_binding_id": env["environment_binding_id"],
            "subject_ref": env["subjects"][0]["subject_ref"]})
        rooms.append((room["room_id"], pairing["connector_credential"], reg["epoch"], reg["poll_interval_ms"]))
    interval_ms = args.interval_ms or rooms[0][3]
    interval_s = interval_ms / 1000
    start = time.monotonic()
    until = start + args.idle_seconds + args.seconds + 60  # a bound; cut short after the stops
    connectors = [Connector(i, port, cred, epoch, interval_s, until)
                  for i, (_, cred, epoch, _) in enumerate(rooms)]
    for c in connectors:
        c.start()
        time.sleep(interval_s / len(connectors))  # spread the polls over the interval
    time.sleep(2 * interval_s)  # every connector past its first poll of the epoch

    # The idle phase: every connector polls, nothing is asked of them.
    idle_polls0, idle_cpu0, idle_t0 = sum(len(c.poll_starts) for c in connectors), cpu_seconds(server.pid), \
        time.monotonic()
    time.sleep(args.idle_seconds)
    idle_polls = sum(len(c.poll_starts) for c in connectors) - idle_polls0
    idle_cpu, idle_elapsed = cpu_seconds(server.pid) - idle_cpu0, time.monotonic() - idle_t0

    # The driver: actions at spread-out moments, then an Emergency Stop per room.
    active_t0, active_polls0, cpu_before = time.monotonic(), sum(len(c.poll_starts) for c in connectors), \
        cpu_seconds(server.pid)
    rng = random.Random(7)
    window = max(1.0, args.seconds - 4 * interval_s)
    plan = sorted((active_t0 + rng.random() * window, r) for r in range(len(rooms)) for _ in range(args.actions))
    calls: list[tuple[int, str, float, float]] = []  # (room, workflow_ref, call sent, call answered)
    for n, (at, r) in enumerate(plan):
        time.sleep(max(0.0, at - time.monotonic()))
        room_id = rooms[r][0]
        sent = time.monotonic()
        wf = tool(agent, token, "helix_minecraft_player_action", {
            "room_id": room_id, "idempotency_key": f"bench-move-{n:06d}",
            "action": {"type": "move_to", "x": n % 100, "y": 64, "z": r}})
        calls.append((r, wf["workflow_ref"], sent, time.monotonic()))
    time.sleep(3 * interval_s)  # the last moves finish
    stops: list[tuple[int, float]] = []
    for r, (room_id, _, _, _) in enumerate(rooms):
        last = [c for c in calls if c[0] == r][-1][1]
        tool(agent, token, "helix_minecraft_workflow_control",
             {"room_id": room_id, "workflow_ref": last, "control": "emergency_stop"})
        stops.append((r, time.monotonic()))
    for c in connectors:
        c.until = min(c.until, time.monotonic() + 4 * interval_s)
    for c in connectors:
        c.join(timeout=args.seconds + 30)
    elapsed = time.monotonic() - active_t0
    cpu = cpu_seconds(server.pid) - cpu_before
    polls = sum(len(c.poll_starts) for c in connectors) - active_polls0
    errors = [e for c in connectors for e in c.errors]
    dispatch_ms, dispatch_polls, succeeded_intervals, call_ms, missing = [], [], [], [], []
    for r, ref, sent, answered in calls:
        c = connectors[r]
        if ref not in c.seen or ref not in c.applied:
            missing.append(ref)
            continue
        dispatch_ms.append((c.seen[ref] - answered) * 1000)
        dispatch_polls.append(c.polls_until(answered, c.seen[ref]))
        succeeded_intervals.append((c.applied[ref] - answered) / interval_s)
        call_ms.append((answered - sent) * 1000)
    not_succeeded = []
    for r, ref, _, _ in calls:
        view = tool(agent, token, "helix_minecraft_workflow_status", {"room_id": rooms[r][0], "workflow_ref": ref})
        if view["status"] != "succeeded":
            not_succeeded.append((ref, view["status"]))
    halt_polls, halt_ms = [], []
    for r, at in stops:
        c = connectors[r]
        if c.halted_at is None:
            missing.append(f"stop of room {r}")
            continue
        halt_polls.append(c.polls_until(at, c.halted_at))
        halt_ms.append((c.halted_at - at) * 1000)

    print(f"connectors {len(connectors)}, poll interval {interval_ms} ms; idle phase {idle_elapsed:.1f} s, "
          f"action phase {elapsed:.1f} s with {len(calls)} move_to actions and {len(stops)} Emergency Stops")
    print(f"idle polls/s                     {idle_polls / idle_elapsed:.1f} ({idle_polls} polls), "
          f"server CPU {idle_cpu / max(1, idle_polls) * 1e6:.0f} us per idle poll")
    print(f"polls/s with actions             {polls / elapsed:.1f} ({polls} polls, {len(errors)} errors), "
          f"server CPU {cpu / max(1, polls) * 1e6:.0f} us per poll (every request of the phase counted)")
    print(f"action -> dispatch               p50 {pct(dispatch_ms, 50):.0f} ms, p99 {pct(dispatch_ms, 99):.0f} ms; "
          f"polls p50 {pct(dispatch_polls, 50)}, max {max(dispatch_polls, default=0)}")
    print(f"move_to call -> succeeded        p50 {pct(succeeded_intervals, 50):.2f}, "
          f"p99 {pct(succeeded_intervals, 99):.2f}, max {max(succeeded_intervals, default=0):.2f} poll intervals "
          f"(from the call's answer; the call itself p50 {pct(call_ms, 50):.0f} ms, p99 {pct(call_ms, 99):.0f} ms)")
    print(f"Emergency Stop -> halt           polls p50 {pct(halt_polls, 50)}, max {max(halt_polls, default=0)}; "
          f"p50 {pct(halt_ms, 50):.0f} ms, p99 {pct(halt_ms, 99):.0f} ms")
    for e in errors[:5]:
        print(f"error: {e}", file=sys.stderr)
    if missing or not_succeeded or errors:
        print(f"FAILED: missing {missing[:5]}, not succeeded {not_succeeded[:5]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
