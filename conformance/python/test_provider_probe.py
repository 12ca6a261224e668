"""`helix conformance` (the provider conformance probe) against `helix serve`, with one fake
provider over real HTTP that answers both the OpenAI Responses and the Gemini
generateContent endpoints. Every check must pass and no credential may reach the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helix_server import helix_bin

OPENAI_KEY = "sk-ci-openai-5e0d21b7"
GEMINI_KEY = "gm-ci-gemini-93c4a8f1"
PROBE_ENV = [
    "CASIMIRBOT_MCP_PUBLIC_BASE_URL",
    "CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP",
    "CASIMIRBOT_MCP_ACCESS_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "CASIMIRBOT_MCP_CONFORMANCE_OPENAI_BASE_URL",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "CASIMIRBOT_MCP_CONFORMANCE_GEMINI_BASE_URL",
]


def start_args(key: str) -> dict:
    return {
        "idempotency_key": key,
        "request": {"objective": "Provider conformance probe.", "budget": {"max_steps": 1, "expires_in_seconds": 60}},
    }


def rpc(url: str, token: str, method: str, params: dict) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json, text/event-stream")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


class FakeProvider(BaseHTTPRequestHandler):
    seen: list[dict] = []
    mcp_calls: list[dict] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def answer(self, value: dict) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if self.path == "/v1/responses":
            self.answer(self.openai(body))
        elif self.path.endswith(":generateContent"):
            call = {"functionCall": {"name": "helix_run_start", "args": start_args("ci-gemini-run-0001")}}
            self.answer({"candidates": [{"content": {"role": "model", "parts": [call]}}]})
        else:
            self.send_error(404)

    def openai(self, body: dict) -> dict:
        """Remote MCP with approval: list the tools, ask approval; on approval, call once."""
        tool = body["tools"][0]
        url, token = tool["server_url"], tool["authorization"]
        args = start_args("ci-openai-run-0001")
        if body.get("previous_response_id") is None:
            listed = rpc(url, token, "tools/list", {})["result"]["tools"]
            tools = [{"name": t["name"]} for t in listed if t["name"] in tool["allowed_tools"]]
            return {
                "id": "resp_1",
                "output": [
                    {"type": "mcp_list_tools", "server_label": "casimirbot", "tools": tools, "error": None},
                    {"type": "mcp_approval_request", "id": "mcpr_1", "name": "helix_run_start",
                     "arguments": json.dumps(args), "server_label": "casimirbot"},
                ],
            }
        called = rpc(url, token, "tools/call", {"name": "helix_run_start", "arguments": args})
        self.mcp_calls.append(called)
        text = called["result"]["content"][0]["text"]
        return {
            "id": "resp_2",
            "output": [{"type": "mcp_call", "name": "helix_run_start", "arguments": json.dumps(args),
                        "output": text, "error": None, "server_label": "casimirbot"}],
        }


def test_the_probe_passes_every_check_with_fake_providers(helix) -> None:
    fake = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    provider = f"http://127.0.0.1:{fake.server_address[1]}"
    token = helix.tokens["full"]
    env = {k: v for k, v in os.environ.items() if k not in PROBE_ENV}
    env.update({
        "CASIMIRBOT_MCP_PUBLIC_BASE_URL": helix.base_url,
        "CASIMIRBOT_MCP_CONFORMANCE_ALLOW_LOOPBACK_HTTP": "1",
        "CASIMIRBOT_MCP_ACCESS_TOKEN": token,
        "OPENAI_API_KEY": OPENAI_KEY,
        "CASIMIRBOT_MCP_CONFORMANCE_OPENAI_BASE_URL": provider,
        "GEMINI_API_KEY": GEMINI_KEY,
        "CASIMIRBOT_MCP_CONFORMANCE_GEMINI_BASE_URL": provider,
    })
    try:
        out = subprocess.run([str(helix_bin()), "conformance"], env=env, capture_output=True, timeout=120)
    finally:
        fake.shutdown()
    stdout = out.stdout.decode()
    assert out.returncode == 0, stdout
    report = json.loads(stdout)
    assert report["schema"] == "casimirbot.mcp_provider_conformance.v1"
    assert {c["name"]: c["status"] for c in report["checks"]} == {
        name: "pass"
        for name in [
            "target", "agent_access_manifest", "protected_resource_metadata", "mcp_unauthenticated_challenge",
            "mcp_initialize", "mcp_tools_list", "openai_responses_invocation", "gemini_function_call_invocation",
        ]
    }, stdout
    for secret in (token, OPENAI_KEY, GEMINI_KEY):
        assert secret not in stdout
    paths = [s["path"] for s in FakeProvider.seen]
    assert paths.count("/v1/responses") == 2 and len(FakeProvider.mcp_calls) == 1, paths
    assert sum(p.endswith(":generateContent") for p in paths) == 1, paths
