"""mcp-remote (npm, pinned in conformance/clients), the stdio bridge desktop hosts run for a
remote server, driven over stdio the way such a host drives it: spawned with only the MCP
URL (the one the Agent Access page's mcp-remote entry gives), sent `initialize` at once, then `notifications/initialized`, `tools/list` and a tool
call. In between, mcp-remote discovers the authorization server, registers itself, prints
the authorization URL (its browser opener is a no-op here) and waits on its own loopback
callback; the person's part is done in headless Chromium. No token is handed to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from codex_cli import REPO_ROOT, Lines, stop
from helix_server import SUBJECT, TENANT
from oauth_browser import Browser, browser_available
from test_mcp_conformance import RUN_TOOLS, assert_run, key, start_request

CLIENTS = REPO_ROOT / "conformance" / "clients" / "node_modules"
MCP_REMOTE = CLIENTS / "mcp-remote" / "dist" / "proxy.js"
WAIT_S = 60.0

IN_CI = os.environ.get("CI") == "true"
pytestmark = pytest.mark.skipif(
    not IN_CI and not (browser_available() and MCP_REMOTE.exists()),
    reason="needs chromium/chromedriver and conformance/clients (npm ci) outside CI",
)


class Bridge:
    """mcp-remote as a host runs it: newline-delimited JSON-RPC on its stdin and stdout,
    its log on stderr."""

    def __init__(self, url: str, home: Path, *flags: str) -> None:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "MCP_REMOTE_CONFIG_DIR": str(home / "mcp-auth"),
            # The opener runs `true URL`: the test walks the printed URL itself.
            "BROWSER": "true",
        }
        self.proc = subprocess.Popen(
            ["node", str(MCP_REMOTE), url, *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=home,
        )
        self.out, self.err = Lines(self.proc.stdout), Lines(self.proc.stderr)
        self.next_id = 0

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def answer(self, rid: int, what: str) -> dict[str, Any]:
        """The response to request `rid` (AssertionError with mcp-remote's log if none comes)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                line = self.out.next(deadline)
            except TimeoutError:
                raise AssertionError(f"no answer to {what}; mcp-remote's log: {self.err.seen[-25:]}") from None
            assert line is not None, f"mcp-remote exited before answering {what}: {self.err.seen[-25:]}"
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                return msg

    def authorization_url(self) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            line = self.err.next(deadline)
            assert line is not None, f"mcp-remote exited before asking for a sign-in: {self.err.seen[-25:]}"
            if line.strip().startswith("http") and "/authorize?" in line:
                return line.strip()

    def log(self) -> list[str]:
        """Its log so far (stderr, every line it has written)."""
        try:
            while self.err.next(time.monotonic() + 0.5) is not None:
                pass
        except TimeoutError:
            pass
        return self.err.seen

    def close(self) -> None:
        stop(self.proc)


def page_url(helix) -> str:
    """The server URL the Agent Access page's mcp-remote entry gives the bridge, after
    checking that the entry pins the mcp-remote release installed here."""
    entry = httpx2.get(f"{helix.base_url}/agent-access.json").json()["clients"]["mcp-remote"]
    server = json.loads(entry["steps"][0]["text"])["mcpServers"][entry["server_name"]]
    pinned = json.loads((CLIENTS.parent / "package.json").read_text())["dependencies"]["mcp-remote"]
    assert server["command"] == "npx" and server["args"][:2] == ["-y", f"mcp-remote@{pinned}"], server
    return server["args"][2]


def test_mcp_remote_signs_in_then_lists_and_calls_a_tool(helix, tmp_path):
    url = page_url(helix)
    assert url == helix.mcp_url, url
    bridge = Bridge(url, tmp_path)
    try:
        init = bridge.request("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "helix-conformance-host", "version": "0.0.0"},
        })
        authorize = bridge.authorization_url()
        redirect = parse_qs(urlsplit(authorize).query)["redirect_uri"][0]
        assert urlsplit(redirect).hostname in ("localhost", "127.0.0.1"), redirect
        with Browser() as browser:
            walk = browser.authorize(authorize, redirect, SUBJECT, TENANT)
        assert walk.pages == ["sign-in", "consent"] and walk.query().get("code"), walk

        answer = bridge.answer(init, "initialize")
        assert answer["result"]["serverInfo"]["name"] == "helix-agent-api", answer
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = bridge.answer(bridge.request("tools/list", {}), "tools/list")
        names = [t["name"] for t in listed["result"]["tools"]]
        assert set(RUN_TOOLS) <= set(names), names

        args = {"idempotency_key": key("mcp-remote"), "request": start_request()}
        called = bridge.answer(bridge.request("tools/call", {"name": "helix_run_start", "arguments": args}),
                               "tools/call")
        result = called["result"]
        assert not result.get("isError"), result
        assert_run(result["structuredContent"])
        stored = list((tmp_path / "mcp-auth").rglob("*_tokens.json"))
        assert stored, "mcp-remote stored no token"
    finally:
        bridge.close()

    # The host starts it again, now letting it negotiate the protocol era (`--protocol auto`:
    # `server/discover`, then 2026-07-28 requests): the stored sign-in is reused, no browser.
    again = Bridge(url, tmp_path, "--protocol", "auto")
    try:
        answer = again.answer(again.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "helix-conformance-host", "version": "0.0.0"}}), "initialize again")
        assert "result" in answer, answer
        again.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = again.answer(again.request("tools/list", {}), "tools/list again")
        assert set(RUN_TOOLS) <= {t["name"] for t in listed["result"]["tools"]}, listed
        log = again.log()
        assert not any("/authorize?" in line for line in log), log[-10:]
        assert any("speaks MCP 2026-07-28" in line for line in log), log[-10:]
    finally:
        again.close()
