"""The action connector's credential lifecycle in a real headless Chromium against
`helix serve`: the room owner pairs a connector on /account/room-connectors (credential
shown once), rotates it with the page's form (a confirmation step, then the new credential
once; the old one is refused at once, checked on the real connector route) and revokes the
pairing (a confirmation step, then back to the page; the connector is refused); the region
form bounds the player (an action outside the box is refused over REST; a coordinate
that is not a number is the page again with its message).

Usage: python tests/browser/test_connectors.py  (env: HELIX_BIN, HELIX_BROWSER_ARTIFACTS,
CHROMIUM_BIN, CHROMEDRIVER_BIN). Exits non-zero on the first failed check.
"""

import json
import sys
import tempfile
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_account import (ARTIFACTS, call, check, chromium, click, free_port, helix, on_page, report_failure, serve,  # noqa: E402
                          server_env, shot, sign_in_as, stop, wait_ready)

SUBJECT, TENANT = "connector-owner", "connector-tenant"
SCOPES = "helix.rooms.read helix.rooms.manage helix.environment_actions.read helix.environment_actions.write"


def fill(driver, values):
    for field, value in values.items():
        el = driver.find_element(By.ID, field)
        if el.tag_name == "select":  # a room or a paired world is picked from a list
            Select(el).select_by_value(value)
            continue
        el.clear()
        el.send_keys(value)


def register(base, credential):
    """The connector's registration with `credential`: its HTTP status."""
    schema_hash = helix("connector-sim", "--print-schema-hash")
    body = {"protocol": "helix.connector.v1",
            "manifest": {"connector_name": "browser-test", "connector_version": "1", "world_id": "overworld"},
            "schema_hash": schema_hash, "capabilities": ["move_to"],
            "subjects": [{"native_id": "p-1", "display_name": "Steve", "online": True}]}
    status, _ = call("POST", f"{base}/api/connectors/v1/register", credential, body)
    return status


def credential_change(driver, base, room_id, binding_id, op):
    """The page's rotate/revoke form, then its confirmation step."""
    driver.get(f"{base}/account/room-connectors")
    on_page(driver, "the pairing page", lambda u: u == f"{base}/account/room-connectors", "#credential-form")
    fill(driver, {"credential-room": room_id, "credential-binding": binding_id})
    click(driver, f"#{op}-button", f"{op} button")
    on_page(driver, f"the {op} confirmation", lambda u: u.endswith("/account/room-connectors/credential"),
            f"#confirm-{op}")
    shot(driver, f"connectors-0{2 if op == 'rotate' else 4}-confirm-{op}")


def region_form(driver, base, room_id, binding_id, token):
    """The page's region form (set, then 303 back to the page): an action outside is refused."""
    driver.get(f"{base}/account/room-connectors")
    on_page(driver, "the pairing page", lambda u: u == f"{base}/account/room-connectors", "#region-form")
    fill(driver, {"region-room": room_id, "region-binding": binding_id, "region-min-x": "-10", "region-min-y": "60",
                  "region-min-z": "-10", "region-max-x": "10", "region-max-y": "80", "region-max-z": "10"})
    driver.find_element(By.ID, "region-min-x").send_keys("a")  # "-10a": not a whole number
    click(driver, "#region-set-button", "set region (a coordinate that is not a number)")
    on_page(driver, "the pairing page with the refusal", lambda u: u.endswith("/account/room-connectors/region"),
            "#pairing-notice")
    check(driver.find_element(By.ID, "pairing-notice").text.startswith("invalid_request:"),
          "the refused region is the page again, with its message")
    fill(driver, {"region-room": room_id, "region-binding": binding_id, "region-min-x": "-10", "region-min-y": "60",
                  "region-min-z": "-10", "region-max-x": "10", "region-max-y": "80", "region-max-z": "10"})
    click(driver, "#region-set-button", "set region")
    on_page(driver, "back on the pairing page", lambda u: u == f"{base}/account/room-connectors", "#pairing-done")
    check(driver.find_element(By.ID, "pairing-done").text.startswith("Region set"), "the page says the region is set")
    shot(driver, "connectors-03b-region")
    rooms = f"{base}/api/v1/rooms/{room_id}"
    _, listing = call("GET", f"{rooms}/environment-subjects", token)
    subject = listing["environments"][0]["subjects"][0]["subject_ref"]
    status, _ = call("POST", f"{rooms}/environment-subjects/select", token,
                     {"environment_binding_id": binding_id, "subject_ref": subject})
    check(status == 200, f"the subject is selected ({status})")
    move = lambda x, key: call("POST", f"{rooms}/player-actions", token,
                               {"action": {"type": "move_to", "x": x, "y": 64, "z": 0}}, {"Idempotency-Key": key})
    status, e = move(11, "e2e-conn-region-01")
    check(e.get("error", {}).get("details", {}).get("reason") == "out_of_region", f"outside the region is refused ({status} {e})")
    status, wf = move(10, "e2e-conn-region-02")
    check(status == 202 and wf["status"] == "queued", f"inside the region is queued ({status})")


def main():
    data_dir = tempfile.mkdtemp(prefix="helix-connectors-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = server_env()
    # The operator path runs before the server (the embedded store is single-process).
    token = helix("dev-token", "--data-dir", data_dir, "--subject", SUBJECT, "--tenant", TENANT, "--scope", SCOPES, env=env)
    helix("account", "policy", "--data-dir", data_dir, "--subject", SUBJECT, "--tenant", TENANT, "--developer", "true", env=env)
    proc, log = serve(data_dir, port)
    driver = None
    try:
        wait_ready(base, proc)
        status, room = call("POST", f"{base}/api/v1/rooms", token, {"name": "Connector lab"},
                            {"Idempotency-Key": "e2e-conn-room-01"})
        check(status == 201, f"room created ({status})")
        room_id = room["room_id"]
        driver = chromium("1280,1000", page_load_timeout=30)
        sign_in_as(driver, base, SUBJECT, TENANT)

        # From the room's section on /rooms: the pairing page with the room filled in.
        driver.get(f"{base}/rooms")
        link = f'section.room[data-room-id="{room_id}"] a.pair-connector'
        on_page(driver, "/rooms", lambda u: u == f"{base}/rooms", link)
        click(driver, link, "Pair an action connector for this room")
        on_page(driver, "the pairing page for the room",
                lambda u: u == f"{base}/account/room-connectors?room_id={room_id}", "#pair-form")
        check(all(driver.find_element(By.ID, f).get_attribute("value") == room_id
                  for f in ("pair-room", "credential-room", "region-room", "clear-room")),
              "every form of the page starts with the room filled in")
        fill(driver, {"pair-room": room_id, "pair-world": "overworld"})
        driver.find_element(By.ID, "pair-button").click()
        WebDriverWait(driver, 20).until(lambda d: d.find_element(By.ID, "connector-credential").text)
        first = driver.find_element(By.ID, "connector-credential").text
        binding_id = json.loads(driver.find_element(By.ID, "connector-config").text)["environment_binding_id"]
        check(first.startswith("hac_"), "the pairing shows the credential once")
        shot(driver, "connectors-01-paired")
        check(register(base, first) == 200, "the paired credential registers a connector")

        credential_change(driver, base, room_id, binding_id, "rotate")
        check(register(base, first) == 200, "nothing rotates before the confirmation")
        click(driver, "#confirm-rotate", "confirm rotation")
        on_page(driver, "the rotated credential", lambda u: u.endswith("/account/room-connectors/credential"),
                "#rotated-credential")
        second = driver.find_element(By.ID, "rotated-credential").text
        check(second.startswith("hac_") and second != first, "the new credential is shown once")
        shot(driver, "connectors-03-rotated")
        check(register(base, first) == 401, "the old credential is refused at once")
        check(register(base, second) == 200, "the new credential registers")
        region_form(driver, base, room_id, binding_id, token)

        credential_change(driver, base, room_id, binding_id, "revoke")
        check(register(base, second) == 200, "nothing is revoked before the confirmation")
        click(driver, "#confirm-revoke", "confirm revocation")
        on_page(driver, "back on the pairing page", lambda u: u == f"{base}/account/room-connectors",
                "#credential-form")
        check(second not in driver.page_source, "the credential is not shown again")
        shot(driver, "connectors-05-revoked")
        check(register(base, second) == 401, "the revoked pairing's connector is refused")
        print(f"connector lifecycle browser test passed; screenshots in {ARTIFACTS}")
    except Exception:
        report_failure(driver, log, data_dir, "connectors-zz-failure")
        raise
    finally:
        stop(driver, proc)


if __name__ == "__main__":
    main()
