"""The MCP App run view (SEP-1865) in a real headless Chromium, with real tool results from
a real `helix serve`: a tiny host page (served here) embeds the view from `resources/read`
in a sandboxed iframe (srcdoc), answers its `ui/initialize`, sends `tool-input` and
`tool-result` once the view says `initialized`, and proxies the view's `tools/call`
(hostCapabilities.serverTools) to `helix serve` over MCP, as an agent host does. The test
speaks MCP as a client that declared `io.modelcontextprotocol/ui` in its handshake.

First view: a run whose turn asked a question (helix_run_continue's result): statuses, the
step budget, the timeline (the view's own helix_run_list_events call), the pending question
and the "not an answer authority" flags. Second view: the completed run
(helix_run_inspect's result): evidence with its provenance (the view's own
helix_run_fetch_evidence call) and the verified terminal product, labelled as not an answer
authority. Screenshots go to the artifacts directory.

Usage: python tests/browser/test_mcp_app.py  (env as test_account.py).
"""

import json
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_account as base  # noqa: E402  (shared helpers: serve, screenshots, waits)


check, shot, expect = base.check, base.shot, base.expect
SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read"
EXTENSION = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
# The library has nothing on this, so the first turn asks which topic to search.
VAGUE = "Which sourdough starter suits a cold kitchen?"
OBJECTIVE = ("Summarize the measured Casimir force between parallel plates, including the Lamoreaux 1997 "
             "torsion pendulum measurement and the sphere-plate geometry with the proximity force approximation.")

HOST_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Test MCP Apps host</title></head>
<body><h1>Test host</h1><iframe id="app" sandbox="allow-scripts" title="Helix run"
 style="width: 900px; height: 500px; border: 1px solid #999"></iframe>
<script src="/host.js"></script></body></html>"""

# The host side of the protocol: what a host does with the view it renders.
HOST_SCRIPT = """
window.hostLog = [];
(async function () {
  const scene = await (await fetch("/scene")).json();
  const frame = document.getElementById("app");
  const post = (m) => { window.hostLog.push({to: "view", m: m}); frame.contentWindow.postMessage(m, "*"); };
  window.addEventListener("message", async (event) => {
    if (event.source !== frame.contentWindow) return;
    const m = event.data;
    window.hostLog.push({from: "view", m: m});
    if (m.method === "ui/initialize") {
      post({jsonrpc: "2.0", id: m.id, result: {
        protocolVersion: "2026-01-26", hostInfo: {name: "helix-test-host", version: "1"},
        hostCapabilities: {serverTools: {}, logging: {}},
        hostContext: {theme: "light", displayMode: "inline", availableDisplayModes: ["inline", "fullscreen"],
                      toolInfo: {tool: scene.tool}, containerDimensions: {width: 900, maxHeight: 4000}}}});
    } else if (m.method === "ui/notifications/initialized") {
      post({jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {arguments: scene.arguments}});
      post({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: scene.result});
    } else if (m.method === "ui/notifications/size-changed") {
      frame.style.height = Math.min(m.params.height + 4, 4000) + "px";
    } else if (m.method === "tools/call") {
      const reply = await (await fetch("/proxy", {method: "POST", body: JSON.stringify(m.params)})).json();
      post(reply.error ? {jsonrpc: "2.0", id: m.id, error: reply.error} : {jsonrpc: "2.0", id: m.id, result: reply.result});
    } else if (m.id !== undefined && m.method) {
      post({jsonrpc: "2.0", id: m.id, error: {code: -32601, message: "not supported by this host"}});
    }
  });
  frame.srcdoc = scene.html;
})();
"""


class Mcp:
    """An MCP client of `/mcp` over plain JSON-RPC: the 2025-11-25 handshake declaring the
    MCP Apps extension, then the session id the server assigned on every request."""

    def __init__(self, url, token):
        self.url, self.token, self.n, self.session = url, token, 0, None

    def rpc(self, method, params):
        self.n += 1
        body = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return base.request(f"{self.url}/mcp", self.token, body, headers)

    def initialize(self):
        import urllib.request
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "clientInfo": {"name": "helix-test-host", "version": "1"},
            "capabilities": {"extensions": {EXTENSION: {"mimeTypes": [MIME]}}}}}
        req = urllib.request.Request(f"{self.url}/mcp", data=json.dumps(body).encode(), method="POST")
        for k, v in {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream"}.items():
            req.add_header(k, v)
        with urllib.request.urlopen(req, timeout=30) as res:
            self.session = res.headers.get("Mcp-Session-Id")
            reply = json.loads(res.read())
        check(EXTENSION in reply["result"]["capabilities"].get("extensions", {}), "the server advertises MCP Apps")
        check(bool(self.session), "the handshake was given a session id")
        self.rpc_notify()

    def rpc_notify(self):
        body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        base.request(f"{self.url}/mcp", self.token, body, {"Accept": "application/json, text/event-stream",
                                                            "MCP-Protocol-Version": "2025-11-25",
                                                            "Mcp-Session-Id": self.session})

    def call(self, name, arguments):
        status, reply = self.rpc("tools/call", {"name": name, "arguments": arguments})
        check(status == 200 and "result" in reply, f"{name} answered ({status})")
        check(not reply["result"].get("isError"), f"{name} succeeded")
        return reply["result"]


class Host(BaseHTTPRequestHandler):
    """The host page, its script, the scene to render, and the tools/call proxy."""

    scene = {}
    mcp = None

    def reply(self, status, ctype, body):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (the http.server name)
        if self.path == "/host.html":
            self.reply(200, "text/html; charset=utf-8", HOST_PAGE)
        elif self.path == "/host.js":
            self.reply(200, "text/javascript", HOST_SCRIPT)
        elif self.path == "/scene":
            self.reply(200, "application/json", json.dumps(Host.scene))
        else:
            self.reply(404, "text/plain", "not found")

    def do_POST(self):  # noqa: N802
        params = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        _, reply = Host.mcp.rpc("tools/call", params)
        self.reply(200, "application/json", json.dumps(reply))

    def log_message(self, *args):
        pass


def in_view(driver, script):
    """Runs `script` inside the view's iframe and returns its value (back in the host page after)."""
    driver.switch_to.frame(driver.find_element("id", "app"))
    try:
        return driver.execute_script(script)
    finally:
        driver.switch_to.default_content()


def text_of(driver, css):
    return lambda d: in_view(d, f"const e = document.querySelector({json.dumps(css)}); return e ? e.textContent : null;")


def render(driver, host_url, tool, arguments, result):
    Host.scene.update({"tool": tool, "arguments": arguments, "result": result})
    driver.get(f"{host_url}/host.html")


def main():
    data_dir = tempfile.mkdtemp(prefix="helix-mcp-app-browser-")
    token = base.helix_check(data_dir, "dev-token", "--subject", "alice", "--tenant", "t1", "--scope", SCOPES)
    port = base.free_port()
    url = f"http://127.0.0.1:{port}"
    proc, log = base.serve(data_dir, port)
    hosting = ThreadingHTTPServer(("127.0.0.1", 0), Host)
    hosting.daemon_threads = True
    threading.Thread(target=hosting.serve_forever, daemon=True).start()
    host_url = f"http://127.0.0.1:{hosting.server_address[1]}"
    driver = None
    try:
        base.wait_ready(url, proc)
        mcp = Mcp(url, token)
        mcp.initialize()
        Host.mcp = mcp
        status, listing = mcp.rpc("tools/list", {})
        tools = {t["name"]: t for t in listing["result"]["tools"]}
        uri = tools["helix_run_continue"]["_meta"]["ui"]["resourceUri"]
        check(uri.startswith("ui://"), f"helix_run_continue names its view ({uri})")
        status, read = mcp.rpc("resources/read", {"uri": uri})
        content = read["result"]["contents"][0]
        check(content["mimeType"] == MIME, "the view is an MCP App HTML resource")
        Host.scene["html"] = content["text"]

        start_args = {"idempotency_key": f"app-{uuid.uuid4().hex[:12]}",
                      "request": {"objective": VAGUE, "database_scope": ["research_library"]}}
        run = mcp.call("helix_run_start", start_args)["structuredContent"]
        cont_args = {"run_id": run["run_id"], "idempotency_key": f"app-{uuid.uuid4().hex[:12]}",
                     "request": {"expected_version": run["version"], "answers": [],
                                 "instruction": "Search the research library."}}
        asked = mcp.call("helix_run_continue", cont_args)
        run = asked["structuredContent"]
        check(run["completion_status"] == "needs_input" and run["pending_questions"],
              f"the first turn asks a question ({run['completion_status']})")
        prompt = run["pending_questions"][0]["prompt"]

        driver = base.chromium("1000,1400", page_load_timeout=30)

        # View 1: the continue result of a run waiting on a question.
        render(driver, host_url, tools["helix_run_continue"], cont_args, asked)
        expect(driver, "the view renders the handed run's statuses", text_of(driver, "#completion_status"),
               lambda t: t == "needs_input")
        check(in_view(driver, "return document.getElementById('lifecycle_status').textContent") == "waiting",
              "lifecycle waiting")
        check(in_view(driver, "return document.getElementById('recommended_next_action').textContent")
              == "answer_questions", "next action answer_questions")
        expect(driver, "the step budget", text_of(driver, "#budget"),
               lambda t: t and t.startswith(f"{run['budget']['steps_used']} of {run['budget']['max_steps']} steps used"))
        expect(driver, "the pending question", text_of(driver, "li.question"), lambda t: t and t.startswith(prompt))
        expect(driver, "the timeline from the view's own helix_run_list_events call",
               lambda d: in_view(d, "return Array.from(document.querySelectorAll('#timeline li.event'), "
                                    "e => e.getAttribute('data-seq'))"),
               lambda seqs: seqs and len(seqs) >= 3 and seqs[0] == "1")
        expect(driver, "the flags", text_of(driver, "#not-an-answer"), lambda t: t and "not an answer authority" in t)
        check(in_view(driver, "return getComputedStyle(document.querySelector('.flag')).borderLeftWidth") == "3px",
              "the view's own style is admitted by its CSP")
        shot(driver, "mcp-app-01-pending-question")
        sent = driver.execute_script("return window.hostLog")
        from_view = [e["m"] for e in sent if "from" in e]
        to_view = [e["m"].get("method") for e in sent if "to" in e]
        init = from_view[0]
        check(init.get("method") == "ui/initialize" and
              init["params"]["appCapabilities"]["availableDisplayModes"] == ["inline", "fullscreen"],
              "the view opens with ui/initialize, declaring its display modes")
        check(from_view[1].get("method") == "ui/notifications/initialized", "then ui/notifications/initialized")
        check(to_view[1:3] == ["ui/notifications/tool-input", "ui/notifications/tool-result"],
              f"the host sends tool-input then tool-result after initialized: {to_view}")
        called = sorted(m["params"]["name"] for m in from_view if m.get("method") == "tools/call")
        check(called == ["helix_run_fetch_evidence", "helix_run_list_events"], f"the view's own reads: {called}")

        # Answer and continue to the end, then View 2: the inspected completed run.
        for _ in range(10):
            if run["recommended_next_action"] == "stop":
                break
            answers = [{"question_id": q["question_id"], "value": OBJECTIVE} for q in run["pending_questions"]]
            run = mcp.call("helix_run_continue", {
                "run_id": run["run_id"], "idempotency_key": f"app-{uuid.uuid4().hex[:12]}",
                "request": {"expected_version": run["version"], "answers": answers,
                            "instruction": "Gather evidence from the research library and complete the objective."}
            })["structuredContent"]
        check(run["completion_status"] == "completed" and run["terminal_authority_status"] == "authorized",
              f"the run completed with authority ({run['completion_status']})")
        inspect_args = {"run_id": run["run_id"]}
        inspected = mcp.call("helix_run_inspect", inspect_args)
        render(driver, host_url, tools["helix_run_inspect"], inspect_args, inspected)
        expect(driver, "the completed run", text_of(driver, "#completion_status"), lambda t: t == "completed")
        expect(driver, "the verified terminal product, labelled as not an answer authority",
               text_of(driver, "#terminal-product .label"),
               lambda t: t and t.startswith("Verified terminal product") and "not an answer authority" in t)
        product = inspected["structuredContent"]["latest_result"]["terminal_product"]
        check(product["text"][:40] in in_view(driver, "return document.getElementById('terminal-product').textContent"),
              "the product text is shown")
        expect(driver, "evidence with its provenance (the view's own helix_run_fetch_evidence call)",
               lambda d: in_view(d, "return Array.from(document.querySelectorAll('#evidence li.evidence .provenance'), "
                                    "e => e.textContent)"),
               lambda p: p and all(t.startswith("source ") and " sha256 " in t for t in p))
        check(not in_view(driver, "return document.getElementById('questions').children.length"),
              "no pending question once answered")
        shot(driver, "mcp-app-02-completed-run")
        driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
        shot(driver, "mcp-app-03-terminal-product")
        print("ok - MCP App run view")
    except BaseException:
        base.report_failure(driver, log, data_dir, "mcp-app-failure")
        raise
    finally:
        base.stop(driver, proc)
        hosting.shutdown()


if __name__ == "__main__":
    main()
