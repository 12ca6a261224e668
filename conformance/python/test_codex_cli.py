"""The real Codex CLI signs in to `helix serve` exactly as the Agent Access page tells a
newcomer: the page's `config.toml` block written verbatim into a fresh CODEX_HOME, its
`codex mcp login` command run (with `--no-browser`, so the authorization URL is printed),
the person's part done in headless Chromium, the redirect caught by Codex's own loopback
listener; then `codex app-server` lists the server's tools and calls one with the stored
OAuth token. No token is pasted anywhere.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from codex_cli import WAIT_S, AppServer, Lines, codex_bin, codex_env
from helix_server import SUBJECT, TENANT
from oauth_browser import Browser, browser_available
from test_mcp_conformance import assert_run, key, start_request

IN_CI = os.environ.get("CI") == "true"
pytestmark = pytest.mark.skipif(
    not IN_CI and not (browser_available() and codex_bin().exists()),
    reason="needs chromium/chromedriver and conformance/codex (npm ci) outside CI",
)


def page_steps(helix) -> tuple[str, list[str], list[str]]:
    """The Codex entry of /agent-access.json: its config block, the login command, and the
    tools it enables."""
    page = httpx2.get(f"{helix.base_url}/agent-access.json").json()
    codex = page["clients"]["codex"]
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


def test_codex_logs_in_as_the_page_says_then_lists_and_calls_a_tool(helix, tmp_path):
    config, argv, enabled_tools = page_steps(helix)
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
        args = {"idempotency_key": key("codex"), "request": start_request()}
        result = app.request(
            "mcpServer/tool/call", {"server": server, "threadId": thread, "tool": "helix_run_start", "arguments": args}
        )
        run = result.get("structuredContent")
        assert not result.get("isError") and isinstance(run, dict), result
        assert_run(run)
    finally:
        app.close()
