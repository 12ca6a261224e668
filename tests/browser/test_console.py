"""The run console in a real headless Chromium against a real `helix serve`: /runs lists
the runs of two agent bindings of one account (newest first) and not a third account's;
a run's page updates while a continue runs (its status turns `running` without a reload);
Cancel on the page ends that run while its turn is running (the turn waits on a Helix Ask
that never answers): the run is `cancelled`, its events contiguous. Screenshots go to the
artifacts directory.

Usage: python tests/browser/test_console.py  (env as test_account.py).
"""

import json
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_account as base  # noqa: E402  (shared helpers: serve, screenshots, waits)

from selenium.webdriver.common.by import By  # noqa: E402

check, shot, until, expect = base.check, base.shot, base.until, base.expect
SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read"


class NeverAnswers(BaseHTTPRequestHandler):
    """A Helix Ask that reads a turn request and never answers (until the caller goes away)."""

    def do_POST(self):  # noqa: N802 (the http.server name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(300)

    def log_message(self, *args):
        pass


def token(data_dir, subject, tenant):
    return base.helix_check(data_dir, "dev-token", "--subject", subject, "--tenant", tenant, "--scope", SCOPES)


def start(url, bearer, key, objective):
    body = {"objective": objective, "database_scope": ["research_library"]}
    status, run = base.request(f"{url}/api/v1/agent-runs", bearer, body, {"Idempotency-Key": key})
    check(status == 201, f"started {objective!r}")
    return run["run_id"]


def events(url, bearer, run_id):
    req = urllib.request.Request(f"{url}/api/v1/agent-runs/{run_id}/events?limit=200")
    req.add_header("Authorization", f"Bearer {bearer}")
    with urllib.request.urlopen(req, timeout=30) as res:
        return json.loads(res.read())["events"]


def main():
    data_dir = tempfile.mkdtemp(prefix="helix-console-browser-")
    # The embedded store is single-process: tokens and the session before serve starts.
    a = token(data_dir, "alice", "t1")
    b = token(data_dir, "alice", "t2")  # the same account under another tenant
    bob = token(data_dir, "bob", "t1")
    cookie = base.helix_check(data_dir, "dev-session", "--subject", "alice", "--tenant", "t1")

    ask = ThreadingHTTPServer(("127.0.0.1", 0), NeverAnswers)
    ask.daemon_threads = True
    threading.Thread(target=ask.serve_forever, daemon=True).start()
    port = base.free_port()
    url = f"http://127.0.0.1:{port}"
    proc, log = base.serve(data_dir, port, {"HELIX_ASK_ENDPOINT": f"http://127.0.0.1:{ask.server_address[1]}/turns",
                                            "HELIX_AGENT_TURN_TIMEOUT_MS": "60000"})
    driver = None
    try:
        base.wait_ready(url, proc)
        watched = start(url, a, "console-browser-a1", "Watch the torsion pendulum")
        start(url, b, "console-browser-b1", "Read the sphere-plate papers")
        start(url, bob, "console-browser-x1", "Bob keeps this one private")

        driver = base.chromium("1400,1000", page_load_timeout=30)
        driver.get(f"{url}/runs")
        base.on_page(driver, "/runs signed out: sent to sign in", lambda u: u == f"{url}/account?return_to=%2Fruns",
                     "#sign-in")
        driver.add_cookie({"name": "helix_session", "value": cookie, "path": "/"})

        driver.get(f"{url}/account")
        base.on_page(driver, "/account", lambda u: u == f"{url}/account", "#runs-link")
        base.click(driver, "#runs-link", "the console link")
        base.on_page(driver, "/runs", lambda u: u == f"{url}/runs", "#runs")
        objectives = base.texts(driver, "tr.run td a")
        check(objectives == ["Watch the torsion pendulum"],
              f"the runs of the tenant signed in with (t1), not t2's, not bob's: {objectives}")
        check("Bob keeps" not in driver.page_source, "another account's run is not listed")
        check("sphere-plate" not in driver.page_source, "the same account's run under another tenant is not listed")
        check(base.texts(driver, "tr.run td.steps") == ["0 of 12"], "steps used of budget")
        shot(driver, "console-runs")

        base.click(driver, f"tr.run[data-run-id='{watched}'] a", "the watched run")
        base.on_page(driver, "the run page", lambda u: u == f"{url}/runs/{watched}", "#timeline li.event")
        check(driver.find_element(By.ID, "lifecycle").text == "waiting", "the run waits for a turn")
        check("not an answer authority" in driver.find_element(By.ID, "not-an-answer").text, "the four flags")

        turn = {}

        def continue_run():
            body = {"expected_version": 1, "instruction": "Find the torsion pendulum result."}
            turn["answer"] = base.request(f"{url}/api/v1/agent-runs/{watched}/continue", a, body,
                                          {"Idempotency-Key": "console-browser-turn"})

        worker = threading.Thread(target=continue_run)
        worker.start()
        expect(driver, "the page shows the turn running without a reload",
               lambda d: d.find_element(By.ID, "lifecycle").text, lambda t: t == "running")
        shot(driver, "console-run-running")

        base.click(driver, "#cancel", "Cancel")
        until(driver, "the confirmation", lambda d: d.switch_to.alert).accept()
        expect(driver, "the run is cancelled on the page",
               lambda d: d.find_element(By.ID, "completion").text, lambda t: t == "cancelled")
        expect(driver, "the timeline shows the cancel",
               lambda d: [e.get_attribute("data-kind") for e in d.find_elements(By.CSS_SELECTOR, "#timeline li")],
               lambda k: k == ["run_started", "run_cancelled"])
        check(not driver.find_element(By.ID, "cancel").is_displayed(), "no Cancel on an ended run")
        check("Run cancelled" in driver.find_element(By.ID, "timeline").text, "the human label")
        shot(driver, "console-run-cancelled")

        worker.join(timeout=20)
        check(not worker.is_alive(), "the running turn stopped")
        status, answer = turn["answer"]
        check(status == 409 and answer["error"]["code"] == "run_not_continuable", f"the turn was refused: {status}")
        seqs = [e["seq"] for e in events(url, a, watched)]
        check(seqs == [1, 2], f"events contiguous: {seqs}")
    except BaseException:
        base.report_failure(driver, log, data_dir, "console-failure")
        raise
    finally:
        base.stop(driver, proc)
        ask.shutdown()


if __name__ == "__main__":
    main()
