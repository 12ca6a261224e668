"""The Shared Live Room path in a real headless Chromium against a real `helix serve`:
sign in, allow agents, create a chat on /chat, attach an agent run (the page shows a
one-time claim handle), the agent claims it over MCP and continues its run to completion
(the local executor signs the terminal product), exactly one assistant message appears and
survives a reload without duplication, then the owner withdraws the bindings over MCP and
the page shows the binding revoked. Screenshots go to the artifacts directory.

Usage: python tests/browser/test_rooms.py  (env as test_account.py).
"""

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_account as base  # noqa: E402  (shared helpers: serve, bearer, screenshots, login)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

check, shot = base.check, base.shot
SCOPES = ("helix.agent_runs.read helix.agent_runs.write helix.rooms.read helix.rooms.manage "
          "helix.data.research_library.read")
OBJECTIVE = ("Summarize the measured Casimir force between parallel plates, including the Lamoreaux 1997 "
             "torsion pendulum measurement and the sphere-plate geometry with the proximity force approximation.")
# The chat's run starts from an objective the library has nothing on, so its first turn asks
# which topic to search (needs_input); the answer narrows it to OBJECTIVE.
VAGUE = "Which sourdough starter suits a cold kitchen?"


class Agent:
    """An MCP client of the bearer lane, speaking plain JSON-RPC over HTTP."""

    def __init__(self, url, token):
        self.url, self.token, self.n = url, token, 0

    def call(self, name, arguments):
        self.n += 1
        body = {"jsonrpc": "2.0", "id": self.n, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        status, reply = base.request(f"{self.url}/mcp", self.token, body, headers)
        check(status == 200 and "result" in reply, f"{name} answered ({status})")
        result = reply["result"]
        check(not result.get("isError"), f"{name} succeeded: {json.dumps(result.get('structuredContent'))[:300]}")
        return result["structuredContent"]


def assistant_messages(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#messages li.message.assistant")


def main():
    base.SCOPES = SCOPES
    data_dir = tempfile.mkdtemp(prefix="helix-rooms-browser-")
    port = base.free_port()
    url = f"http://127.0.0.1:{port}"
    proc, log = base.serve(data_dir, port)
    driver = None
    try:
        base.wait_ready(url, proc)
        driver = base.chromium("1400,1000", page_load_timeout=30)

        # Sign in and allow agents (so the agent's bearer of this identity is admitted).
        at_provider = lambda u: u.startswith(f"{url}/dev-oidc/authorize?")  # noqa: E731
        driver.get(f"{url}/account")
        base.on_page(driver, "/account, signed out", lambda u: u == f"{url}/account", "#sign-in")
        base.click(driver, "#sign-in", "sign-in")
        base.on_page(driver, "the development provider", at_provider, "#dev-sign-in")
        base.dev_provider_login(driver, url, "#account-ref", "/account after sign-in")
        base.click(driver, "#allow-agents", "allow-agents")
        base.on_page(driver, "the development provider (step-up)", at_provider, "#dev-sign-in")
        base.dev_provider_login(driver, url, 'tr.binding[data-status="active"]', "/account with an active binding")
        base.expect(driver, "agents allowed", lambda d: d.find_element(By.ID, "oauth-ready").text, lambda t: t == "yes")
        agent = Agent(url, base.bearer(data_dir))

        # The agent creates a room and a run, and binds the run to the room.
        room = agent.call("helix_room_create", {"idempotency_key": f"room-{uuid.uuid4().hex[:12]}",
                                                "request": {"name": "Casimir bench"}})
        run = agent.call("helix_run_start", {"idempotency_key": f"start-{uuid.uuid4().hex[:12]}",
                                             "request": {"objective": VAGUE, "database_scope": ["research_library"]}})
        run_id = run["run_id"]
        bound = agent.call("helix_room_bind_run", {"request": {"room_id": room["room_id"], "run_id": run_id}})
        check(bound["binding_status"] == "active", "run bound to the room")

        # The person creates a chat, writes a message and attaches an agent run.
        driver.get(f"{url}/chat")
        driver.find_element(By.ID, "new-chat").click()
        driver.find_element(By.ID, "message-input").send_keys("What force did Lamoreaux measure?")
        driver.find_element(By.ID, "send").click()
        WebDriverWait(driver, 10).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages li.user")) == 1)
        # A second tab of /chat, open before the attach: binding changes reach it, the
        # one-time claim handle does not.
        status = lambda d: d.find_element(By.ID, "binding-status").text  # noqa: E731
        first = driver.current_window_handle
        driver.switch_to.new_window("tab")
        second = driver.current_window_handle
        driver.get(f"{url}/chat")
        base.expect(driver, "the chat in a second tab, unbound", status, lambda t: t == "none")
        driver.switch_to.window(first)
        driver.find_element(By.ID, "attach").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "claim-handle").text.startswith("hcc_"))
        handle = driver.find_element(By.ID, "claim-handle").get_attribute("textContent").strip()
        check(len(handle) == 68, f"a claim handle of the issued shape ({len(handle)} characters)")
        check(driver.find_element(By.ID, "binding-status").text == "awaiting_claim", "awaiting the agent's claim")
        shot(driver, "rooms-01-claim-handle")
        driver.switch_to.window(second)
        base.expect(driver, "the attach reached the second tab", status, lambda t: t == "awaiting_claim")
        check(not driver.find_element(By.ID, "claim").is_displayed() and handle not in driver.page_source,
              "the claim handle stays in the tab that attached")
        driver.switch_to.window(first)

        # The agent claims the chat over MCP and continues its run to completion.
        claimed = agent.call("helix_room_claim_chat_binding", {"request": {"claim_handle": handle, "run_id": run_id}})
        check(claimed["chat_id_included"] is False and "binding_ref" in claimed, "claim receipt without the chat id")
        asked = False
        for _ in range(10):
            if run["recommended_next_action"] == "stop":
                break
            prompts = [q["prompt"] for q in run.get("pending_questions") or []]
            if prompts and not asked:  # the chat shows the question a needs_input run waits on
                asked = True
                base.expect(driver, "the pending question on the chat page",
                            lambda d: d.execute_script("return Array.from(document.querySelectorAll("
                                                      "'#pending-questions li.question'), e => e.textContent)"), lambda t: t == prompts)
                shot(driver, "rooms-02-pending-question")
            answers = [{"question_id": q["question_id"], "value": OBJECTIVE}
                       for q in run.get("pending_questions") or []]
            run = agent.call("helix_run_continue", {
                "run_id": run_id, "idempotency_key": f"cont-{uuid.uuid4().hex[:12]}",
                "request": {"expected_version": run["version"], "answers": answers,
                            "instruction": "Gather evidence from the research library and complete the objective."}})
        check(asked, "the run asked a question on its way")
        check(run["completion_status"] == "completed" and run["terminal_authority_status"] == "authorized",
              f"run completed with authorized terminal authority ({run['completion_status']})")

        # Exactly one assistant message, the verified terminal product; progress in its own lane.
        WebDriverWait(driver, 30).until(lambda d: len(assistant_messages(d)) >= 1)
        time.sleep(2.5)  # more poll cycles: still one
        msgs = assistant_messages(driver)
        check(len(msgs) == 1, f"exactly one assistant message ({len(msgs)})")
        message_id = msgs[0].get_attribute("data-message-id")
        check(message_id.startswith("msg_") and msgs[0].text.strip() != "", "a stable message id and content")
        progress = driver.find_elements(By.CSS_SELECTOR, "#progress li.receipt")
        check(len(progress) >= 2, f"progress receipts in their own lane ({len(progress)})")
        # Read in one script: the lane is re-rendered on every poll.
        receipts = driver.execute_script(
            "return Array.from(document.querySelectorAll('#progress li.receipt'), e => e.textContent)")
        check(receipts[0] == "#1 Run started" and all("_" not in r for r in receipts),
              f"progress in human labels, not event names: {receipts}")
        check(not driver.find_element(By.ID, "pending").is_displayed(), "no pending question once completed")
        check(driver.find_element(By.ID, "binding-status").text == "bound", "bound")
        shot(driver, "rooms-03-terminal-message")

        driver.refresh()
        WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        time.sleep(2.5)
        msgs = assistant_messages(driver)
        check(len(msgs) == 1 and msgs[0].get_attribute("data-message-id") == message_id,
              "after a reload: still exactly one assistant message, same id")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#messages li.user")) == 1, "the user message survives")
        shot(driver, "rooms-03-after-reload")

        # The owner withdraws both bindings; the page shows the chat binding revoked.
        w = agent.call("helix_room_unbind_chat", {"binding_ref": claimed["binding_ref"]})
        check(w["revocation_status"] == "revoked", "chat binding withdrawn")
        w = agent.call("helix_room_unbind_run", {"binding_ref": bound["binding_ref"]})
        check(w["revocation_status"] == "revoked", "run binding withdrawn")
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "binding-status").text == "revoked")
        check(len(assistant_messages(driver)) == 1, "the answer stays, once")
        shot(driver, "rooms-04-withdrawn")

        # A chat attached and then disconnected in the second tab: the first tab follows both.
        driver.find_element(By.ID, "new-chat").click()
        driver.find_element(By.ID, "attach").click()
        base.expect(driver, "a second chat attached", status, lambda t: t == "awaiting_claim")
        driver.switch_to.window(second)
        base.expect(driver, "the second chat reached the second tab", lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chat-item")), lambda n: n == 2)
        base.click_rendered(driver, "the second chat", lambda d: d.find_elements(By.CSS_SELECTOR, ".chat-item")[-1])
        base.expect(driver, "the second tab sees the attach", status, lambda t: t == "awaiting_claim")
        driver.find_element(By.ID, "disconnect").click()
        base.expect(driver, "disconnected in the second tab", status, lambda t: t == "disconnected")
        driver.switch_to.window(first)
        base.expect(driver, "the disconnect reached the first tab", status, lambda t: t == "disconnected")
        check(not driver.find_element(By.ID, "disconnect").is_displayed(), "nothing left to disconnect")
        driver.switch_to.window(second)
        driver.close()
        driver.switch_to.window(first)
        # A long message whose 2,000-character cut would fall inside an emoji (a thumbs-up
        # with a skin tone is two code points, four UTF-16 units): the page cuts on a
        # grapheme boundary within the server's code-point limit, and the server admits it.
        driver.execute_script("""
            var chats = JSON.parse(localStorage.getItem('helix.chats.v1')) || [];
            chats.push({ id: 'chat-emoji', title: 'Emoji', progress: [], seen: 0, messages: [
                { id: 'local-emoji', role: 'user', content: 'a' + '\\u{1F44D}\\u{1F3FD}'.repeat(1000) }] });
            localStorage.setItem('helix.chats.v1', JSON.stringify(chats));""")
        driver.get(f"{url}/chat")
        base.on_page(driver, "/chat with the emoji chat", lambda u: u == f"{url}/chat", "#attach")
        base.expect(driver, "the emoji chat selected",
                    lambda d: [e.get_attribute("data-message-id") for e in d.find_elements(By.CSS_SELECTOR, "#messages li")],
                    lambda ids: ids == ["local-emoji"])
        base.click(driver, "#attach", "attach the emoji chat")
        base.expect(driver, "a claim handle for the emoji chat",
                    lambda d: d.find_element(By.ID, "binding-status").text, lambda t: t == "awaiting_claim")
        handle = driver.find_element(By.ID, "claim-handle").get_attribute("textContent").strip()
        emoji_run = agent.call("helix_run_start", {
            "idempotency_key": f"start-{uuid.uuid4().hex[:12]}",
            "request": {"objective": OBJECTIVE, "database_scope": ["research_library"]}})
        claimed = agent.call("helix_room_claim_chat_binding",
                             {"request": {"claim_handle": handle, "run_id": emoji_run["run_id"]}})
        check(claimed["snapshot_message_count"] == 1 and claimed["snapshot_char_count"] == 1999,
              f"cut to whole emoji within 2,000 code points ({claimed['snapshot_char_count']})")
        shot(driver, "rooms-05-emoji-attached")

        driver.get(f"{url}/rooms")
        # Read through waits: a one-shot read right after get() raced the page under load.
        base.expect(driver, "the owner's room on /rooms", lambda d: d.page_source, lambda s: "Casimir bench" in s)
        base.expect(driver, "one member: the owner",
                    lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.member")), lambda n: n == 1)
        shot(driver, "rooms-06-rooms-page")

        # An invite, then the form's address opened again: the rooms page, not a 405.
        base.click(driver, ".create-invite", "create invite")
        base.expect(driver, "the invite code shown once", lambda d: base.texts(d, "#invite-code"),
                    lambda t: len(t) == 1 and t[0] != "")
        driver.get(f"{url}/rooms/invite")
        base.expect(driver, "GET of the invite form's address is the rooms page", lambda d: d.current_url,
                    lambda u: u == f"{url}/rooms")
        check("Casimir bench" in driver.page_source and not driver.find_elements(By.ID, "invite-code"),
              "the rooms page again, the code not shown twice")
        # Raising the consent version asks first: the form does not submit until confirmed.
        valid = "return document.querySelector('.raise-consent').form.checkValidity()"
        check(driver.execute_script(valid) is False, "raise consent needs its confirmation box")
        driver.find_element(By.CSS_SELECTOR, ".confirm-raise").click()
        check(driver.execute_script(valid) is True, "confirmed, the form may submit")

        # Past the first page: 51 rooms are 50 on the first page and a working next-page link.
        for i in range(50):
            agent.call("helix_room_create", {"idempotency_key": f"more-{i:02d}-{uuid.uuid4().hex[:12]}",
                                             "request": {"name": f"Bench {i:02d}"}})
        room_ids = lambda d: [s.get_attribute("data-room-id") for s in d.find_elements(By.CSS_SELECTOR, "section.room")]  # noqa: E731
        driver.get(f"{url}/rooms")
        base.expect(driver, "a full first page of rooms", lambda d: len(room_ids(d)), lambda n: n == 50)
        first = room_ids(driver)
        base.click(driver, "#rooms-next", "next page of rooms")
        base.expect(driver, "the second page of rooms", lambda d: d.current_url, lambda u: "/rooms?cursor=hpc1_" in u)
        base.expect(driver, "the one remaining room", lambda d: len(room_ids(d)), lambda n: n == 1)
        second = room_ids(driver)
        check(len(set(first + second)) == 51, "every room once across the two pages")
        check(not driver.find_elements(By.ID, "rooms-next"), "no next-page link on the last page")
        shot(driver, "rooms-07-second-page")
        print(f"rooms browser test passed; screenshots in {base.ARTIFACTS}")
    except Exception:
        base.report_failure(driver, log, data_dir, "rooms-zz-failure")
        raise
    finally:
        base.stop(driver, proc)


if __name__ == "__main__":
    main()
