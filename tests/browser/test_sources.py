"""End to end, with real parts: `helix serve`, a headless Chromium and `helix source-sim`.
A developer creates a room and a read-only source (REST, bearer), claims the source
credential once in the signed-in browser at the claim URL, runs the reference producer
with that bearer, starts a run with `bound_room_evidence`, binds it to the room, and the
run completes on live room evidence with verified authority. Then the producer stops and,
past the freshness window, the next run's turn is blocked with `room_evidence_stale`.
Last, the producer runs again and a run with `bound_room_environment_probe` completes on
its answer to the inventory-check probe the turn queued (source-sim polls and answers it).

Usage: python tests/browser/test_sources.py  (env: HELIX_BIN, HELIX_BROWSER_ARTIFACTS,
CHROMIUM_BIN, CHROMEDRIVER_BIN). Exits non-zero on the first failed check.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_account import (ARTIFACTS, HELIX_BIN, call, check, chromium, click, free_port, helix, on_page,  # noqa: E402
                          report_failure, serve, server_env, shot, sign_in_as, stop, wait_ready)

SUBJECT, TENANT = "source-developer", "source-tenant"
SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.rooms.read helix.rooms.manage helix.room_sources.manage"
MAX_AGE_MS = 4000


def claim_in_page(driver, claim_url, handle):
    driver.get(claim_url)
    field = driver.find_element(By.ID, "claim-handle")
    field.clear()
    field.send_keys(handle)
    driver.find_element(By.ID, "claim-button").click()
    WebDriverWait(driver, 20).until(
        lambda d: d.find_element(By.ID, "claim-result").is_displayed() or d.find_element(By.ID, "claim-error").text
    )


def bound_run(base, token, room_id, key, scope="bound_room_evidence"):
    status, run = call("POST", f"{base}/api/v1/agent-runs", token,
                       {"objective": "What is happening in the shared world right now?",
                        "database_scope": [scope]}, {"Idempotency-Key": key})
    check(status == 201, f"run started with {scope} ({status})")
    status, binding = call("POST", f"{base}/api/v1/rooms/run-bindings", token,
                           {"room_id": room_id, "run_id": run["run_id"]})
    check(status == 201 and binding["binding_status"] == "active", "run bound to the room")
    return run


def continue_run(base, token, run, key):
    return call("POST", f"{base}/api/v1/agent-runs/{run['run_id']}/continue", token,
                {"expected_version": run["version"], "instruction": "Report what the room shows now."},
                {"Idempotency-Key": key})


def main():
    data_dir = tempfile.mkdtemp(prefix="helix-sources-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    extra = {"HELIX_AGENT_DATABASE_SCOPES": "research_library,bound_room_evidence,bound_room_environment_probe",
             "HELIX_BOUND_ROOM_EVIDENCE_MAX_AGE_MS": str(MAX_AGE_MS)}
    env = server_env(extra)
    # The operator path runs before the server (the embedded store is single-process).
    token = helix("dev-token", "--data-dir", data_dir, "--subject", SUBJECT, "--tenant", TENANT, "--scope", SCOPES, env=env)
    helix("account", "policy", "--data-dir", data_dir, "--subject", SUBJECT, "--tenant", TENANT, "--developer", "true", env=env)
    proc, log = serve(data_dir, port, extra)
    driver = None
    try:
        wait_ready(base, proc)
        status, room = call("POST", f"{base}/api/v1/rooms", token, {"name": "Shared world"},
                            {"Idempotency-Key": "e2e-room-0001"})
        check(status == 201, f"room created ({status})")
        status, created = call("POST", f"{base}/api/v1/rooms/{room['room_id']}/sources", token,
                               {"adapter_profile": "minecraft", "world_id": "overworld"},
                               {"Idempotency-Key": "e2e-source-0001"})
        check(status == 201, f"source created ({status})")
        delivery = created["credential_delivery"]
        check(delivery["bearer_included"] is False and delivery["plugin_config_included"] is False,
              "the agent-facing delivery carries no bearer and no plugin config")

        driver = chromium("1280,1000", page_load_timeout=30)
        sign_in_as(driver, base, SUBJECT, TENANT)
        claim_in_page(driver, delivery["claim_url"], delivery["claim_handle"])
        bearer = driver.find_element(By.ID, "source-bearer").text
        plugin_config = json.loads(driver.find_element(By.ID, "plugin-config").text)
        check(bearer.startswith("hsb_"), "the page shows the source bearer once")
        check(plugin_config["world_id"] == "overworld" and plugin_config["adapter_profile"] == "minecraft",
              "the page shows the plugin configuration")
        check(driver.find_element(By.ID, "claim-handle").get_attribute("value") == "", "the handle field is cleared")
        shot(driver, "sources-01-claimed")
        claim_in_page(driver, delivery["claim_url"], delivery["claim_handle"])
        check(driver.find_element(By.ID, "claim-error").text == "claim_handle_invalid", "a second claim is refused")
        check(bearer not in driver.page_source, "the bearer is not shown again")
        shot(driver, "sources-02-second-claim-refused")

        config_path = Path(data_dir) / "plugin-config.json"
        config_path.write_text(json.dumps(plugin_config))
        sim_env = dict(env, HELIX_SOURCE_BEARER=bearer)
        sim = subprocess.run([HELIX_BIN, "source-sim", "--plugin-config", str(config_path), "--ticks", "3",
                              "--interval-ms", "200"], capture_output=True, text=True, env=sim_env)
        check(sim.returncode == 0, f"source-sim played its world ({sim.stderr.strip()[-200:]})")
        check(bearer not in sim.stdout and bearer not in sim.stderr, "source-sim never prints the bearer")

        run = bound_run(base, token, room["room_id"], "e2e-run-0001")
        status, done = continue_run(base, token, run, "e2e-turn-0001")
        check(status == 200 and done["completion_status"] == "completed", f"the run completed ({done.get('completion_status')})")
        check(done["terminal_authority_status"] == "authorized", "terminal authority verified")
        status, evidence = call("GET", f"{base}/api/v1/agent-runs/{run['run_id']}/evidence", token)
        families = {e["family"] for e in evidence["evidence"]}
        check(families == {"shared_live_room_evidence"}, f"evidence is live room evidence ({families})")
        check(bearer not in json.dumps(evidence) and bearer not in json.dumps(done), "no bearer in run or evidence")

        # The producer has stopped; past the freshness window the next turn is blocked.
        second = bound_run(base, token, room["room_id"], "e2e-run-0002")
        time.sleep(MAX_AGE_MS / 1000 + 1.5)
        status, stale = continue_run(base, token, second, "e2e-turn-0002")
        check(status == 200 and stale["completion_status"] == "blocked", f"the stale turn is blocked ({stale.get('completion_status')})")
        check(stale["latest_result"]["failure_code"] == "room_evidence_stale", "with the stale-evidence failure")

        # The producer runs again; a probe run's turn queues an inventory check that
        # source-sim picks up on its next poll and answers through ingress.
        sim = subprocess.Popen([HELIX_BIN, "source-sim", "--plugin-config", str(config_path), "--ticks", "0",
                                "--interval-ms", "200"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=sim_env)
        try:
            probe_run = bound_run(base, token, room["room_id"], "e2e-run-0003", "bound_room_environment_probe")
            status, probed = continue_run(base, token, probe_run, "e2e-turn-0003")
        finally:
            sim.terminate()
            sim_out, sim_err = sim.communicate(timeout=10)
        check(status == 200 and probed["completion_status"] == "completed",
              f"the probe run completed ({probed.get('completion_status')}, {probed.get('latest_result')})")
        check(probed["terminal_authority_status"] == "authorized", "terminal authority verified on the probe answer")
        status, evidence = call("GET", f"{base}/api/v1/agent-runs/{probe_run['run_id']}/evidence", token)
        families = {e["family"] for e in evidence["evidence"]}
        check(families == {"shared_live_room_environment_probe"}, f"evidence is the probe answer ({families})")
        check('"probe_id"' in sim_out, "source-sim reported the probe it answered")
        check(bearer not in sim_out and bearer not in sim_err, "source-sim never prints the bearer")

        # The person's view of those runs: the console lists them, and the completed run's page
        # shows its timeline, its live room evidence with provenance and the verified product.
        driver.get(f"{base}/runs")
        on_page(driver, "/runs with the room runs", lambda u: u == f"{base}/runs", f"tr.run[data-run-id='{run['run_id']}']")
        shot(driver, "sources-03-runs")
        click(driver, f"tr.run[data-run-id='{run['run_id']}'] a", "the completed run")
        on_page(driver, "the completed run's page", lambda u: u == f"{base}/runs/{run['run_id']}", "#evidence tbody tr")
        check(driver.find_element(By.ID, "completion").get_attribute("data-status") == "completed", "a completed badge")
        check(driver.find_elements(By.ID, "terminal-product"), "the verified terminal product is shown")
        ref = driver.find_element(By.CSS_SELECTOR, "#evidence code.ref")
        check(ref.get_attribute("title") == ref.get_attribute("data-ref") and len(ref.get_attribute("title")) >= len(ref.text),
              f"the evidence ref is shortened with its full value on hover ({ref.text})")
        check(driver.find_elements(By.CSS_SELECTOR, "#evidence code.ref + button.copy-ref"), "with a copy button")
        shot(driver, "sources-04-run-evidence")
        print(f"sources end-to-end test passed; screenshots in {ARTIFACTS}")
    except Exception:
        report_failure(driver, log, data_dir, "sources-zz-failure")
        raise
    finally:
        stop(driver, proc)


if __name__ == "__main__":
    main()
