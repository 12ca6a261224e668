"""The pages' flows in a real headless Chromium against a real `helix serve`: a signed-out
visit of each page lands on sign-in and comes back to that page after it; a return path to
another site is refused; the step-up sign-in offers the identity signed in; every form of
/account and /rooms, opened again after its post, is a page (not a 405), and a form that
redirects back says once what it did; Revoke, Remove
member, Raise consent and revoking action authority ask first; a refused form (a wrong invite
code) is the page again with its message; a guest's pairing and claim pages say they are not
for guests and carry no form.

"Opened again" is `driver.get(current URL)`: after a post/redirect/get that is a reload of
the page; after a form whose answer is a page (an invite code, a confirmation step) it is
the form's address by GET, which a reload or a revisit of that address sends.

Usage: python tests/browser/test_flows.py  (env as test_account.py).
"""

import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_account as base  # noqa: E402  (shared helpers: serve, bearer, screenshots, waits)
from test_rooms import Agent  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402

check, shot, click, on_page, expect = base.check, base.shot, base.click, base.on_page, base.expect
OWNER, MEMBER, GUEST, TENANT = "flow-owner", "flow-member", "flow-guest", "flow-tenant"
SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.rooms.read helix.rooms.manage"
# Each page that needs a signed-in browser and an element only that page has.
PAGES = [("/rooms", "#join-code"), ("/chat", "#new-chat"), ("/runs", "#status-filter"),
         ("/runs?status=running", "#status-filter"), ("/account/room-connectors", "#pair-form"),
         ("/account/room-sources/claim", "#claim-form")]


# The URL and the text of one document, read by one script (two commands could straddle a
# navigation: the old URL with the new text).
URL_AND_TEXT = "return [document.URL, document.documentElement.outerHTML]"


def field(driver, name):
    return driver.find_element(By.ID, name).get_attribute("value")


def provider_sign_in(driver, url, subject, tenant):
    """On the development provider's page: sign in as subject/tenant (the caller waits for
    where that leads)."""
    on_page(driver, "the development provider", lambda u: u.startswith(f"{url}/dev-oidc/authorize?"), "#dev-sign-in")
    base.dev_provider_submit(driver, subject, tenant)


def sign_in_from(driver, url, page, marker, subject):
    """Signed out, `page` sends the browser to sign in; after it, the browser is back on it."""
    driver.get(f"{url}{page}")
    sign_in = f"{url}/account?return_to={quote(page, safe='')}"
    on_page(driver, f"{page} signed out: the sign-in", lambda u: u == sign_in, "#sign-in")
    check(field(driver, "return-to") == page, f"the sign-in comes back to {page}")
    click(driver, "#sign-in", "sign-in")
    provider_sign_in(driver, url, subject, TENANT)
    on_page(driver, f"{page} after the sign-in", lambda u: u == f"{url}{page}", marker)


def sign_out(driver, url):
    driver.get(f"{url}/account")
    on_page(driver, "/account", lambda u: u == f"{url}/account", "#sign-out")
    click(driver, "#sign-out", "sign-out")
    on_page(driver, "/account signed out", lambda u: u == f"{url}/account", "#sign-in")
    opened_again(driver, url, "/account", "#sign-in", "sign-out")


def opened_again(driver, url, page, marker, form):
    """The current address opened again is a page: `page` with `marker`, never a 405."""
    driver.get(driver.current_url)
    on_page(driver, f"{form}, opened again: {page}", lambda u: u == f"{url}{page}", marker)


def submit(driver, url, css, what, after, marker):
    """Clicks a form's button and waits for the page it answers (at `after`)."""
    click(driver, css, what)
    return on_page(driver, f"after {what}", lambda u: u == f"{url}{after}", marker)


def main():
    base.SCOPES = SCOPES
    data_dir = tempfile.mkdtemp(prefix="helix-flows-browser-")
    port = base.free_port()
    url = f"http://127.0.0.1:{port}"
    # A guest account (the operator's policy, set before the server: the embedded store is
    # single-process).
    base.helix_check(data_dir, "dev-session", "--subject", GUEST, "--tenant", TENANT)
    base.helix_check(data_dir, "account", "policy", "--subject", GUEST, "--tenant", TENANT, "--guest", "true")
    proc, log = base.serve(data_dir, port)
    driver = None
    try:
        base.wait_ready(url, proc)
        driver = base.chromium("1280,1000", page_load_timeout=60)

        # Signed out, each page sends the visitor to sign in, and back to it after.
        for page, marker in PAGES:
            driver.delete_all_cookies()
            sign_in_from(driver, url, page, marker, OWNER)
        shot(driver, "flows-01-back-after-sign-in")

        # A return path to another site: the sign-in page drops it, the form refuses it.
        driver.delete_all_cookies()
        driver.get(f"{url}/account?return_to={quote('//evil.example/rooms', safe='')}")
        on_page(driver, "the sign-in, an unsafe return path dropped", lambda u: u.startswith(f"{url}/account?"),
                "#sign-in")
        check(not driver.find_elements(By.ID, "return-to"), "no return path to another site in the form")
        driver.get(f"{url}/account?return_to=%2Frooms")
        on_page(driver, "the sign-in coming back to /rooms", lambda u: u.endswith("return_to=%2Frooms"), "#return-to")
        driver.execute_script("document.getElementById('return-to').value = '//evil.example/rooms'")
        click(driver, "#sign-in", "sign-in with a forged return path")
        refused = base.until(driver, "the forged return path refused",
                             lambda d: d.execute_script(URL_AND_TEXT), lambda s: "invalid_request" in s[1])
        check(refused[0] == f"{url}/account/sign-in" and "evil.example" not in refused[0],
              f"refused on this site: {refused[0]}")
        driver.get(f"{url}/account?return_to={quote('https://evil.example/', safe='')}")
        click(driver, "#sign-in", "sign-in from a page given an absolute URL")
        provider_sign_in(driver, url, OWNER, TENANT)
        on_page(driver, "/account: the sign-in never left for another site", lambda u: u == f"{url}/account",
                "#account-ref")
        shot(driver, "flows-02-open-redirect-refused")

        # The step-up is prefilled with the identity signed in; signing in as offered works.
        click(driver, "#allow-agents", "allow-agents")
        on_page(driver, "the step-up sign-in", lambda u: u.startswith(f"{url}/dev-oidc/authorize?"), "#dev-sign-in")
        check((field(driver, "subject"), field(driver, "tenant")) == (OWNER, TENANT),
              "the step-up offers the signed-in subject and tenant")
        shot(driver, "flows-03-step-up-prefilled")
        click(driver, "#dev-sign-in", "sign in as offered")
        on_page(driver, "/account with agents allowed", lambda u: u == f"{url}/account", 'tr.binding[data-status="active"]')
        opened_again(driver, url, "/account", 'tr.binding[data-status="active"]', "allow agents")
        driver.get(f"{url}/account/sign-in")
        on_page(driver, "the sign-in form's address by GET: /account", lambda u: u == f"{url}/account", "#account-ref")

        # The owner's room (made by the owner's agent) and its forms.
        agent = Agent(url, owner_bearer(data_dir))
        room = agent.call("helix_room_create", {"idempotency_key": f"room-{uuid.uuid4().hex[:12]}",
                                                "request": {"name": "Flow bench"}})
        room_sel = f"section.room[data-room-id='{room['room_id']}']"
        driver.get(f"{url}/rooms")
        on_page(driver, "/rooms", lambda u: u == f"{url}/rooms", room_sel)
        submit(driver, url, ".create-invite", "create invite", "/rooms/invite", "#invite-code")
        code = driver.find_element(By.ID, "invite-code").text.strip()
        check(code != "", "an invite code, shown once")
        opened_again(driver, url, "/rooms", room_sel, "create invite")
        check(driver.find_element(By.CSS_SELECTOR, f"{room_sel} .room-stop-none").text.startswith("no action connector"),
              "a room without a paired connector says so where its Emergency Stop is")
        check(not driver.find_elements(By.ID, "invite-code"), "the code is not shown twice")
        for css, what, says in ((".emergency-stop", "Emergency Stop", "Emergency Stop: every player of this room"),
                                (".clear-emergency-stop", "clear the stop", "The room's Emergency Stop is cleared")):
            submit(driver, url, css, what, "/rooms", "#rooms-done")
            check(driver.find_element(By.ID, "rooms-done").text.startswith(says), f"the page says what {what} did")
            opened_again(driver, url, "/rooms", room_sel, what)
            check(not driver.find_elements(By.ID, "rooms-done"), f"said once: not again after {what}'s reload")
        sign_out(driver, url)

        # The member: sent to sign in by /rooms and back, previews the invite, joins.
        sign_in_from(driver, url, "/rooms", "#join-code", MEMBER)
        driver.find_element(By.ID, "join-code").send_keys("not-a-real-code")
        submit(driver, url, "#join", "a wrong invite code", "/rooms/join/preview", "#rooms-notice")
        check(driver.find_element(By.ID, "rooms-notice").text.startswith("invite_invalid:"),
              "a wrong code is refused on the page, with its message")
        check(not driver.find_elements(By.ID, "accept-invite"), "nothing to accept")
        shot(driver, "flows-02b-wrong-invite-code")
        driver.find_element(By.ID, "join-code").send_keys(code)
        submit(driver, url, "#join", "the join preview", "/rooms/join/preview", "#accept-invite")
        opened_again(driver, url, "/rooms", "#join-code", "join preview")
        driver.find_element(By.ID, "join-code").send_keys(code)
        submit(driver, url, "#join", "the join preview again", "/rooms/join/preview", "#accept-invite")
        submit(driver, url, "#accept-invite", "accept and join", "/rooms", room_sel)
        opened_again(driver, url, "/rooms", room_sel, "join")
        sign_out(driver, url)

        # The owner raises the consent version (it asks first), grants and revokes authority.
        sign_in_from(driver, url, "/rooms", room_sel, OWNER)
        valid = "return document.querySelector(arguments[0]).form.checkValidity()"
        check(driver.execute_script(valid, ".raise-consent") is False, "raise consent needs its confirmation")
        click(driver, ".confirm-raise", "tick: every member accepts again")
        submit(driver, url, ".raise-consent", "raise consent", "/rooms", room_sel)
        opened_again(driver, url, "/rooms", room_sel, "raise consent")
        check(driver.find_element(By.CSS_SELECTOR, f"{room_sel} .consent-version").text.startswith("2"), "consent v2")
        member_row = f"{room_sel} tr.member:has(.remove-member)"  # the one row that is not the owner's
        submit(driver, url, f"{member_row} .grant-authority", "grant authority", "/rooms", f"{member_row} .revoke-authority")
        check(driver.find_element(By.ID, "rooms-done").text.startswith("Action authority granted"),
              "the page says the authority is granted")
        opened_again(driver, url, "/rooms", f"{member_row} .revoke-authority", "grant authority")
        submit(driver, url, f"{member_row} .revoke-authority", "revoke authority", "/rooms/members/authority",
               "#confirm-revoke")
        check(driver.find_elements(By.CSS_SELECTOR, f"{member_row} .revoke-authority"), "not revoked before confirming")
        opened_again(driver, url, "/rooms", f"{member_row} .revoke-authority", "revoke authority (unconfirmed)")
        submit(driver, url, f"{member_row} .revoke-authority", "revoke authority", "/rooms/members/authority",
               "#confirm-revoke")
        submit(driver, url, "#confirm-revoke-authority", "confirm the revoke", "/rooms", f"{member_row} .grant-authority")
        opened_again(driver, url, "/rooms", f"{member_row} .grant-authority", "confirmed revoke")
        sign_out(driver, url)

        # The member accepts the raised consent version.
        sign_in_from(driver, url, "/rooms", f"{room_sel} .accept-consent", MEMBER)
        submit(driver, url, f"{room_sel} .accept-consent", "accept consent v2", "/rooms", room_sel)
        check(not driver.find_elements(By.CSS_SELECTOR, f"{room_sel} .accept-consent"), "consent accepted")
        opened_again(driver, url, "/rooms", room_sel, "accept consent")
        sign_out(driver, url)

        # The owner removes the member: it asks first.
        sign_in_from(driver, url, "/rooms", member_row, OWNER)
        check(driver.execute_script(valid, f"{member_row} .remove-member") is False, "remove needs its confirmation")
        click(driver, f"{member_row} .confirm-remove", "tick: remove this member")
        submit(driver, url, f"{member_row} .remove-member", "remove the member", "/rooms", room_sel)
        expect(driver, "only the owner is left", lambda d: len(d.find_elements(By.CSS_SELECTOR, f"{room_sel} tr.member")),
               lambda n: n == 1)
        opened_again(driver, url, "/rooms", room_sel, "remove member")

        # Revoking the agent binding asks first; confirmed, it is revoked.
        driver.get(f"{url}/account")
        active = 'tr.binding[data-status="active"]'
        on_page(driver, "/account", lambda u: u == f"{url}/account", active)
        submit(driver, url, f"{active} button.revoke", "revoke", "/account/agent-bindings/revoke",
               "#confirm-revoke-binding")
        opened_again(driver, url, "/account", active, "revoke (unconfirmed)")
        submit(driver, url, f"{active} button.revoke", "revoke", "/account/agent-bindings/revoke",
               "#confirm-revoke-binding")
        submit(driver, url, "#confirm-revoke-binding-button", "confirm the revoke", "/account",
               'tr.binding[data-status="revoked"]')
        opened_again(driver, url, "/account", 'tr.binding[data-status="revoked"]', "confirmed revoke")
        shot(driver, "flows-04-revoked")
        sign_out(driver, url)

        # A guest: the pairing and claim pages say they are not for guests, with no form.
        driver.delete_all_cookies()
        sign_in_from(driver, url, "/account/room-connectors", "#guest-notice", GUEST)
        check(not driver.find_elements(By.CSS_SELECTOR, "form"), "no pairing form for a guest")
        driver.get(f"{url}/account/room-sources/claim")
        on_page(driver, "the claim page as a guest", lambda u: u == f"{url}/account/room-sources/claim",
                "#guest-notice")
        check(not driver.find_elements(By.CSS_SELECTOR, "form"), "no claim form for a guest")
        shot(driver, "flows-05-guest-claim-page")
        print(f"flows browser test passed; screenshots in {base.ARTIFACTS}")
    except Exception:
        base.report_failure(driver, log, data_dir, "flows-zz-failure")
        raise
    finally:
        base.stop(driver, proc)


def owner_bearer(data_dir):
    """The owner's agent bearer (what `helix dev-token` mints for that identity)."""
    base.SUBJECT, base.TENANT = OWNER, TENANT
    return base.bearer(data_dir)


if __name__ == "__main__":
    main()
