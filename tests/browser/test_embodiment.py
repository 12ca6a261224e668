"""Player embodiment's Emergency Stops in a real headless Chromium against `helix serve`
with a running `helix connector-sim`: the room owner pairs the connector on
/account/room-connectors, an agent's long workflow runs, the owner presses the room page's
**Emergency Stop** (the workflow is `stopped`, checked over MCP; a new action is refused),
clears it on the page (a new action is accepted); then a member joins, selects their
player under "Your identity in this environment", and stops their own player from the page:
only that player's workflow stops (the owner's plays on), the connector halts that player,
and the member clears it on the page.

Usage: python tests/browser/test_embodiment.py  (env: HELIX_BIN, HELIX_BROWSER_ARTIFACTS,
CHROMIUM_BIN, CHROMEDRIVER_BIN). Exits non-zero on the first failed check.
"""

import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_account import (ARTIFACTS, HELIX_BIN, call, check, chromium, click, free_port, helix, on_page, report_failure,  # noqa: E402
                          serve, server_env, shot, sign_in_as, stop, wait_ready)

OWNER, MEMBER, TENANT = "embodiment-owner", "embodiment-member", "embodiment-tenant"
SCOPES = "helix.rooms.read helix.rooms.manage helix.environment_actions.read helix.environment_actions.write"
# Sixteen 200-tick waits: minutes of polls at the simulator's pace, so it is running when stopped.
LONG = {"type": "sequence", "steps": [{"type": "wait", "ticks": 200}] * 16}
OPEN = ("queued", "dispatched", "running", "verifying")


def tool(base, token, name, arguments):
    """One MCP tools/call on the bearer lane: (isError, structuredContent)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    status, reply = call("POST", f"{base}/mcp", token, body, headers)
    if status != 200 or "result" not in reply:
        raise AssertionError(f"{name} answered {status}: {json.dumps(reply)[:300]}")
    return bool(reply["result"].get("isError")), reply["result"]["structuredContent"]


def act(base, token, room_id, action):
    args = {"room_id": room_id, "idempotency_key": f"emb-{uuid.uuid4().hex[:16]}", "action": action}
    return tool(base, token, "helix_minecraft_player_action", args)


def workflow(base, token, room_id, ref):
    is_error, v = tool(base, token, "helix_minecraft_workflow_status", {"room_id": room_id, "workflow_ref": ref})
    check(not is_error, f"status of {ref}")
    return v


def until(what, probe, ok, timeout=40):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if ok(value):
            print(f"ok - {what}")
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: last seen {json.dumps(value)[:300]}")
        time.sleep(0.25)


def subjects(base, token, room_id):
    is_error, v = tool(base, token, "helix_environment_subject_list", {"room_id": room_id})
    check(not is_error, "subject list")
    return v["environments"][0] if v["environments"] else {"subjects": [], "connector_live": False}


def by_name(env, name):
    return next(s for s in env["subjects"] if s["display_name"] == name)


def rooms_page(driver, base, marker, what):
    return on_page(driver, what, lambda u: u == f"{base}/rooms", marker)


def refused(result, code):
    is_error, v = result
    return is_error and v.get("error", {}).get("code") == code


def main():
    data_dir = tempfile.mkdtemp(prefix="helix-embodiment-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = server_env()
    # The operator path runs before the server (the embedded store is single-process).
    owner = helix("dev-token", "--data-dir", data_dir, "--subject", OWNER, "--tenant", TENANT, "--scope", SCOPES, env=env)
    member = helix("dev-token", "--data-dir", data_dir, "--subject", MEMBER, "--tenant", TENANT, "--scope", SCOPES,
                   env=env)
    helix("account", "policy", "--data-dir", data_dir, "--subject", OWNER, "--tenant", TENANT, "--developer", "true",
          env=env)
    proc, log = serve(data_dir, port)
    driver, other, sim = None, None, None
    sim_log = Path(data_dir) / "connector-sim.log"
    try:
        wait_ready(base, proc)
        status, room = call("POST", f"{base}/api/v1/rooms", owner, {"name": "Embodiment lab"},
                            {"Idempotency-Key": "e2e-emb-room-01"})
        check(status == 201, f"room created ({status})")
        room_id = room["room_id"]
        driver = chromium("1280,1200", page_load_timeout=30)
        sign_in_as(driver, base, OWNER, TENANT)

        # The owner pairs a connector on the page and runs connector-sim with its config.
        driver.get(f"{base}/account/room-connectors")
        on_page(driver, "the pairing page", lambda u: u == f"{base}/account/room-connectors", "#pair-form")
        Select(driver.find_element(By.ID, "pair-room")).select_by_value(room_id)  # picked, not typed
        el = driver.find_element(By.ID, "pair-world")
        el.clear()
        el.send_keys("overworld")
        driver.find_element(By.ID, "pair-button").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_element(By.ID, "connector-credential").text)
        credential = driver.find_element(By.ID, "connector-credential").text
        config = json.loads(driver.find_element(By.ID, "connector-config").text)
        check(credential.startswith("hac_"), "paired: the credential is shown once")
        config_path = Path(data_dir) / "connector.json"
        config_path.write_text(json.dumps(config))
        sim = subprocess.Popen([HELIX_BIN, "connector-sim", "--config", str(config_path), "--players", "Steve,Alex",
                                "--interval-ms", "250"], stdout=open(sim_log, "w"), stderr=subprocess.STDOUT,
                               env={**env, "HELIX_CONNECTOR_CREDENTIAL": credential})
        until("the connector is live with two players", lambda: subjects(base, owner, room_id),
              lambda e: e["connector_live"] and len(e["subjects"]) == 2)

        # An agent's long workflow on the owner's player runs.
        steve = by_name(subjects(base, owner, room_id), "Steve")["subject_ref"]
        is_error, _ = tool(base, owner, "helix_environment_subject_select",
                           {"room_id": room_id, "environment_binding_id": config["environment_binding_id"],
                            "subject_ref": steve})
        check(not is_error, "the owner's agent selected Steve")
        is_error, wa = act(base, owner, room_id, LONG)
        check(not is_error and wa["status"] == "queued", "a long workflow queued")
        until("the workflow runs", lambda: workflow(base, owner, room_id, wa["workflow_ref"])["status"],
              lambda s: s == "running")

        # The owner presses the room page's Emergency Stop.
        driver.get(f"{base}/rooms")
        rooms_page(driver, base, "button.emergency-stop", "/rooms as the owner")
        shot(driver, "embodiment-01-owner-rooms")
        click(driver, "button.emergency-stop", "Emergency Stop")
        rooms_page(driver, base, "#identities .room-stop-active", "/rooms after the stop")
        v = workflow(base, owner, room_id, wa["workflow_ref"])
        check((v["status"], v["reason"]) == ("stopped", "emergency_stop"), f"the workflow is stopped ({v['status']})")
        check(refused(act(base, owner, room_id, {"type": "wait", "ticks": 1}), "emergency_stop_active"),
              "a new action is refused while the stop is active")
        check(subjects(base, owner, room_id)["emergency_stop_active"], "the subject list shows the room's stop")
        check(driver.find_element(By.CSS_SELECTOR, "section.room .room-stop-state").text.endswith(
            "active, new actions are refused until you clear it."), "the room's section shows its stop")
        shot(driver, "embodiment-02-room-stopped")
        click(driver, "button.clear-emergency-stop", "Clear the Emergency Stop")
        rooms_page(driver, base, "section.room .room-stop-off", "/rooms after clearing")
        is_error, wa2 = act(base, owner, room_id, LONG)
        check(not is_error and wa2["status"] == "queued", "after the person cleared it, a new action is accepted")

        # A member joins in the browser (the owner's invite) and gets action authority.
        driver.get(f"{base}/rooms")
        rooms_page(driver, base, "button.create-invite", "/rooms before inviting")
        click(driver, "button.create-invite", "Create invite")
        on_page(driver, "the invite code", lambda u: u.endswith("/rooms/invite"), "#invite-code")
        code = driver.find_element(By.ID, "invite-code").text.strip()
        other = chromium("1280,1200", page_load_timeout=30)
        sign_in_as(other, base, MEMBER, TENANT)
        other.get(f"{base}/rooms")
        rooms_page(other, base, "#join-code", "/rooms as the member, before joining")
        other.find_element(By.ID, "join-code").send_keys(code)
        click(other, "#join", "join")
        on_page(other, "the join preview", lambda u: u.endswith("/rooms/join/preview"), "#accept-invite")
        click(other, "#accept-invite", "accept and join")
        rooms_page(other, base, "#identities", "/rooms as a member with an environment")
        driver.get(f"{base}/rooms")
        rooms_page(driver, base, "button.grant-authority", "/rooms with the new member")
        click(driver, "button.grant-authority", "Grant action authority")
        rooms_page(driver, base, "button.revoke-authority", "/rooms after the grant")

        # The member selects their identity (Alex) on the page.
        env_now = subjects(base, member, room_id)
        alex = by_name(env_now, "Alex")
        check(not alex["selected_by_caller"] and not alex["held_by_other"], "Alex is free")
        other.get(f"{base}/rooms")
        row = f'tr.subject[data-subject-ref="{alex["subject_ref"]}"]'
        rooms_page(other, base, f"{row} button.select-subject", "the member's identity section")
        shot(other, "embodiment-03-member-identity")
        click(other, f"{row} button.select-subject", "Select Alex")
        rooms_page(other, base, f"{row} button.stop-my-player", "/rooms with Alex selected")
        check(other.find_element(By.CSS_SELECTOR, f"{row} .selection").text == "selected by you",
              "the page shows Alex selected by the member")
        check(by_name(subjects(base, member, room_id), "Alex")["selected_by_caller"],
              "the agent's subject list shows the browser's selection")

        # The member's agent drives Alex; the member stops their own player from the page.
        is_error, wb = act(base, member, room_id, LONG)
        check(not is_error and wb["status"] == "queued", "the member's long workflow queued")
        until("the member's workflow runs", lambda: workflow(base, member, room_id, wb["workflow_ref"])["status"],
              lambda s: s == "running")
        click(other, f"{row} button.stop-my-player", "Emergency Stop my player")
        rooms_page(other, base, f"{row} button.clear-my-player-stop", "/rooms with the member's player stopped")
        check(other.find_element(By.CSS_SELECTOR, f"{row} .subject-stop").text == "active",
              "the page shows the player's stop")
        shot(other, "embodiment-04-member-stopped")
        v = workflow(base, member, room_id, wb["workflow_ref"])
        check((v["status"], v["reason"]) == ("stopped", "emergency_stop"), f"the member's workflow is stopped ({v})")
        check(workflow(base, owner, room_id, wa2["workflow_ref"])["status"] in OPEN,
              "the owner's workflow on Steve plays on")
        until("connector-sim halts exactly Alex", lambda: sim_log.read_text(),
              lambda t: "Emergency Stop of player" in t)
        check(refused(act(base, member, room_id, {"type": "wait", "ticks": 1}), "emergency_stop_active"),
              "a new action on the stopped player is refused")
        env_now = subjects(base, member, room_id)
        check(by_name(env_now, "Alex")["subject_stop_active"] and not by_name(env_now, "Steve")["subject_stop_active"],
              "the subject list shows the stop on Alex only")
        is_error, a3 = act(base, owner, room_id, {"type": "chat", "text": "still here"})
        check(not is_error and a3["status"] == "queued", "the owner's player still takes actions")

        # Only the person clears it, on the page.
        click(other, f"{row} button.clear-my-player-stop", "Clear my player's Emergency Stop")
        rooms_page(other, base, f"{row} button.stop-my-player", "/rooms after clearing the player's stop")
        is_error, wb2 = act(base, member, room_id, {"type": "chat", "text": "back"})
        check(not is_error and wb2["status"] == "queued", "after the member cleared it, a new action is accepted")
        until("the cleared player's action runs to the end",
              lambda: workflow(base, member, room_id, wb2["workflow_ref"])["status"], lambda s: s == "succeeded")
        shot(other, "embodiment-05-member-cleared")
        print(f"embodiment browser test passed; screenshots in {ARTIFACTS}")
    except Exception:
        report_failure(other or driver, log, data_dir, "embodiment-zz-failure")
        if sim_log.exists():
            print("--- connector-sim log (tail) ---\n" + "\n".join(sim_log.read_text().splitlines()[-30:]))
        raise
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(timeout=10)
        if other is not None:
            other.quit()
        stop(driver, proc)


if __name__ == "__main__":
    main()
