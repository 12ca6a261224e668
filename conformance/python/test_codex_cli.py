"""The real Codex CLI signs in to `helix serve` exactly as the Agent Access page tells a
newcomer: the page's `config.toml` block written verbatim into a fresh CODEX_HOME, its
`codex mcp login` command run (with `--no-browser`, so the authorization URL is printed),
the person's part done in headless Chromium, the redirect caught by Codex's own loopback
listener; then `codex app-server` lists the server's tools and calls one with the stored
OAuth token. No token is pasted anywhere. Both Codex profiles of the page are signed in
this way; the second one (runs + rooms + player) also creates a room and acts as the player.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from codex_cli import WAIT_S, AppServer, Lines, codex_bin, codex_env
from helix_server import SUBJECT, TENANT, helix_bin
from oauth_browser import Browser, browser_available
from test_embodiment_mcp import CAPABILITIES, STEVE, connector, embodied, http  # noqa: F401 (embodied: a fixture)
from test_mcp_conformance import assert_run, key, start_request

IN_CI = os.environ.get("CI") == "true"


@pytest.fixture(autouse=True)
def codex_registers(monkeypatch):
    """This Codex names its client by a metadata document on chatgpt.com when the server
    advertises them, which a machine without the internet cannot fetch: its servers here
    take no metadata documents, so Codex registers (the CIMD path has its own test)."""
    monkeypatch.setenv("HELIX_DEV_OAUTH_CLIENT_METADATA", "0")
pytestmark = pytest.mark.skipif(
    not IN_CI and not (browser_available() and codex_bin().exists()),
    reason="needs chromium/chromedriver and conformance/codex (npm ci) outside CI",
)


def page_steps(helix, client: str = "codex") -> tuple[str, list[str], list[str]]:
    """A Codex entry of /agent-access.json: its config block, the login command, and the
    tools it enables."""
    page = httpx2.get(f"{helix.base_url}/agent-access.json").json()
    codex = page["clients"][client]
    assert codex["available"], codex
    config = next(s["text"] for s in codex["steps"] if s["language"] == "toml" and "[mcp_servers." in s["text"])
    login = next(s["text"] for s in codex["steps"] if s["language"] == "sh")
    argv = shlex.split(login)
    assert argv[:3] == ["codex", "mcp", "login"], login
    enabled = config.split("enabled_tools = [", 1)[1].split("]", 1)[0]
    tools = [t.strip().strip('",') for t in enabled.splitlines() if t.strip()]
    return config, argv, tools


def login(home: Path, argv: list[str], env: dict[str, str], browser: Browser) -> list[str]:
    """`codex mcp login NAME --no-browser`: read the URL it prints, walk it in the browser
    to Codex's loopback callback, and wait for Codex to finish. Returns its output."""
    proc = subprocess.Popen(
        [str(codex_bin()), *argv[1:], "--no-browser"],
        stdin=subprocess.PIPE,  # kept open: Codex also offers to read a pasted callback URL
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=home,
    )
    out = Lines(proc.stdout)
    try:
        deadline = time.monotonic() + WAIT_S
        url = None
        while url is None:
            line = out.next(deadline)
            assert line is not None, f"codex mcp login ended before printing a URL: {out.seen}"
            if "/authorize?" in line:
                url = line.strip()
        query = parse_qs(urlsplit(url).query)
        redirect = query["redirect_uri"][0]
        walk = browser.authorize(url, redirect, SUBJECT, TENANT, client_name="Codex")
        assert walk.pages[-1] == "consent" and walk.query().get("code"), walk
        rc = proc.wait(timeout=WAIT_S)
        while out.next(time.monotonic() + 5) is not None:
            pass
        assert rc == 0, f"codex mcp login exited {rc}: {out.seen}"
        return out.seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def signed_in_app_server(helix, tmp_path: Path, client: str) -> tuple[AppServer, str, str, list[str]]:
    """The page's entry written into a fresh CODEX_HOME, its login done in the browser, then
    `codex app-server` initialized: (app, server name, thread id, enabled tools)."""
    config, argv, enabled_tools = page_steps(helix, client)
    server = argv[3]
    home = tmp_path / "home"
    env = codex_env(home)
    (home / ".codex" / "config.toml").write_text(config)

    with Browser() as browser:
        output = login(home, argv, env, browser)
    assert any("success" in line.lower() for line in output), output
    listed = subprocess.run(
        [str(codex_bin()), "mcp", "list", "--json"], env=env, cwd=home, capture_output=True, timeout=WAIT_S
    )
    assert listed.returncode == 0, listed.stderr.decode(errors="replace")
    (entry,) = [e for e in json.loads(listed.stdout) if e["name"] == server]
    assert entry["auth_status"] == "o_auth", entry
    assert "Bearer" not in config and "token" not in config.lower(), "the page's config carries a token"

    app = AppServer(env, home)
    try:
        app.request("initialize", {"clientInfo": {"name": "helix-conformance", "version": "0.0.0"}})
        app.notify("initialized")
        status = app.request("mcpServerStatus/list", {})
        entry = next(s for s in status["data"] if s["name"] == server)
        assert entry["authStatus"] == "oAuth", entry
        assert sorted(entry["tools"]) == sorted(enabled_tools), (sorted(entry["tools"]), enabled_tools)
        thread = app.request("thread/start", {"cwd": str(home), "ephemeral": True})["thread"]["id"]
    except BaseException:
        app.close()
        raise
    return app, server, thread, enabled_tools


def call(app: AppServer, server: str, thread: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call through Codex; its structured result, which must not be an error."""
    result = app.request("mcpServer/tool/call", {"server": server, "threadId": thread, "tool": tool, "arguments": args})
    content = result.get("structuredContent")
    assert not result.get("isError") and isinstance(content, dict), (tool, result)
    return content


def test_codex_logs_in_as_the_page_says_then_lists_and_calls_a_tool(helix, tmp_path):
    app, server, thread, _ = signed_in_app_server(helix, tmp_path, "codex")
    try:
        args = {"idempotency_key": key("codex"), "request": start_request()}
        assert_run(call(app, server, thread, "helix_run_start", args))
    finally:
        app.close()


def test_the_rooms_profile_creates_a_room_and_acts_as_the_player(embodied, tmp_path):
    """The second profile (runs + rooms + player): Codex creates a room, a connector is
    paired for it in the browser lane and reports its player, then Codex lists and selects
    that player, queues an action and reads its workflow."""
    app, server, thread, enabled = signed_in_app_server(embodied, tmp_path, "codex-rooms")
    try:
        assert {"helix_room_create", "helix_environment_subject_select", "helix_minecraft_player_action"} <= set(enabled)
        room = call(app, server, thread, "helix_room_create",
                    {"idempotency_key": key("codex-room"), "request": {"name": "Codex world"}})
        assert room["schema"] == "helix.room.v1" and room["role"] == "owner", room
        listed = call(app, server, thread, "helix_room_list", {})
        assert room["room_id"] in [r["room_id"] for r in listed["rooms"]], listed

        status, pairing = http(embodied, "POST", "/api/account/room-connectors/pairings",
                               {"room_id": room["room_id"], "world_id": "overworld"}, cookie=embodied.tokens["cookie"])
        assert status == 201, pairing
        connector(embodied, pairing["connector_credential"], "register", {
            "protocol": "helix.connector.v1",
            "manifest": {"connector_name": "scripted", "connector_version": "1.0.0", "world_id": "overworld"},
            "schema_hash": schema_hash(),
            "capabilities": CAPABILITIES,
            "subjects": [{"native_id": STEVE, "display_name": "Steve", "online": True}],
        })

        subjects = call(app, server, thread, "helix_environment_subject_list", {"room_id": room["room_id"]})
        assert STEVE not in json.dumps(subjects), subjects
        subject = subjects["environments"][0]["subjects"][0]["subject_ref"]
        call(app, server, thread, "helix_environment_subject_select", {
            "room_id": room["room_id"], "environment_binding_id": pairing["environment_binding_id"],
            "subject_ref": subject})
        workflow = call(app, server, thread, "helix_minecraft_player_action", {
            "room_id": room["room_id"], "idempotency_key": key("codex-act"),
            "action": {"type": "move_to", "x": 3, "y": 64, "z": 1}})
        assert workflow["status"] == "queued", workflow
        read = call(app, server, thread, "helix_minecraft_workflow_status",
                    {"room_id": room["room_id"], "workflow_ref": workflow["workflow_ref"]})
        assert read["workflow_ref"] == workflow["workflow_ref"] and read["status"] == "queued", read
    finally:
        app.close()


def schema_hash() -> str:
    """The admitted action schema's hash, as `helix connector-sim` registers it."""
    out = subprocess.run([str(helix_bin()), "connector-sim", "--print-schema-hash"], capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr
    return out.stdout.decode().strip()
