"""Every page a person uses, at 1280 and at 390 px wide, in a real headless Chromium against a
real `helix serve`: each page, in the states a person meets it in, is shown at both widths,
saved as a screenshot (artifacts dir, `screenshots/<page>-<width>.png`), passes axe-core, and
passes the checks of a page a person enjoys:

- no table header breaks inside a word, and no page scrolls sideways (a wide table scrolls in
  its own box);
- times are relative, to the minute, with the exact instant in `<time datetime>`; no time on
  any page shows a fraction of a second;
- people and rooms appear by name (the provider's display name, the room's name); their
  hashes only on request (inside a closed `<details>`);
- the invite names its room;
- connector and binding ids are picked from lists (`<select>`), not typed;
- a run waiting for an answer reads "needs your answer", never a red "blocked";
- the run page leads with the answer and its evidence;
- the consent page shows the client's name, where it runs (its redirect host), each scope in
  plain words beside its identifier, and what approving allows.

Usage: python tests/browser/test_pages.py  (env as test_account.py).
"""

import base64
import hashlib
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

sys.path.insert(0, str(Path(__file__).resolve().parent))
import axe  # noqa: E402
import test_account as base  # noqa: E402  (shared helpers: serve, waits, clicks)

check, until, expect, click, on_page = base.check, base.until, base.expect, base.click, base.on_page
OWNER, MEMBER, TENANT = "pages-owner", "pages-member", "pages-tenant"
OWNER_NAME, MEMBER_NAME = "Ada Lovelace", "Grace Hopper"
ROOM = "Pendulum lab"
CLIENT = "Pages Test Client"
SCOPES = ("helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read helix.rooms.read "
          "helix.rooms.manage helix.environment_actions.read helix.environment_actions.write")
WIDTHS = (1280, 390)
SHOTS = base.ARTIFACTS / "screenshots"
# The library has nothing on this, so the first turn asks which topic to search.
VAGUE = "Which sourdough starter suits a cold kitchen?"
OBJECTIVE = ("Summarize the measured Casimir force between parallel plates, including the Lamoreaux 1997 "
             "torsion pendulum measurement and the sphere-plate geometry with the proximity force approximation.")

# The layout checks of one page at one width, read in one script.
LAYOUT = r"""
function brokenWords(th) {
  var broken = [];
  var walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
  for (var n = walker.nextNode(); n; n = walker.nextNode()) {
    var re = /\S+/g, m;
    while ((m = re.exec(n.data))) {
      var r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
      var lines = new Set(Array.from(r.getClientRects()).map(function (q) { return Math.round(q.top); }));
      if (lines.size > 1) broken.push(m[0]);
    }
  }
  return broken;
}
var headers = Array.from(document.querySelectorAll("th")).filter(function (th) { return th.getClientRects().length; });
var visible = document.body.innerText;
var attrs = Array.from(document.querySelectorAll("[title], time[datetime]")).map(function (e) {
  return (e.getAttribute("title") || "") + " " + (e.getAttribute("datetime") || ""); }).join(" ");
return {
  broken: headers.map(function (th) { return {th: th.textContent.trim(), words: brokenWords(th),
                                              overflow: th.scrollWidth > th.clientWidth + 1}; })
                 .filter(function (h) { return h.words.length || h.overflow; }),
  pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
  wide: Array.from(document.querySelectorAll("body *")).filter(function (e) {
    var inBox = e.parentElement && e.parentElement.closest(".table-scroll");
    return e.getBoundingClientRect().right > window.innerWidth + 1 && !inBox;
  }).slice(-4).map(function (e) { return e.outerHTML.slice(0, 100); }),
  visible: visible, times: Array.from(document.querySelectorAll("time")).filter(function (t) {
    return t.getClientRects().length; }).map(function (t) {
    return {text: t.textContent.trim(), datetime: t.getAttribute("datetime") || ""}; }),
  stamped: attrs,
};
"""
FRACTION = re.compile(r"\d\d:\d\d:\d\d[.,]\d")
RELATIVE = re.compile(r"^(just now|(in )?\d+ (min|h|h \d+ min|days?)( ago)?|on \d{4}-\d\d-\d\d)$")


def width(driver, px):
    """The page laid out `px` CSS pixels wide (the viewport, as a phone or a laptop has it)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": px, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    until(driver, f"laid out {px} px wide", lambda d: d.execute_script("return window.innerWidth"), lambda w: w == px)


def visit(driver, name, page_checks=None):
    """The page the browser shows, at each width: screenshot, axe-core, the layout checks,
    then `page_checks(driver, layout)`."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        for px in WIDTHS:
            width(driver, px)
            what = f"{name} at {px} px"
            axe.save_full_page(driver, SHOTS / f"{name}-{px}.png")
            axe.accessibility(driver, what)
            layout = driver.execute_script(LAYOUT)
            check(not layout["broken"], f"{what}: no header breaks inside a word or overflows: {layout['broken']}")
            check(layout["pageWidth"] <= layout["viewport"],
                  f"{what}: the page does not scroll sideways ({layout['pageWidth']} > {layout['viewport']}: "
                  f"{layout['wide']})")
            check(not FRACTION.search(layout["visible"]) and not FRACTION.search(layout["stamped"]),
                  f"{what}: no time shows a fraction of a second")
            odd = [t for t in layout["times"] if not RELATIVE.match(t["text"]) or not t["datetime"].endswith("Z")]
            check(not odd, f"{what}: every time is relative with its exact instant: {odd}")
            if page_checks:
                page_checks(driver, layout)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def hidden_hashes(driver, layout, what):
    """No hash is in the page's visible text; each one it has sits in a closed <details>."""
    shown = re.findall(r"(account|tenant):sha256:\S+", layout["visible"])
    check(not shown, f"{what}: no account or tenant hash in the visible text: {shown[:3]}")


def sign_in(driver, url, subject, name):
    """Signs `subject` in through the development provider with a display `name`."""
    driver.get(f"{url}/account")
    on_page(driver, "/account, signed out", lambda u: u.startswith(f"{url}/account"), "#sign-in")
    click(driver, "#sign-in", "sign-in")
    on_page(driver, "the development provider", lambda u: u.startswith(f"{url}/dev-oidc/authorize?"), "#dev-sign-in")
    for field, value in (("subject", subject), ("tenant", TENANT), ("name", name)):
        el = driver.find_element(By.ID, field)
        el.clear()
        el.send_keys(value)
    click(driver, "#dev-sign-in", "dev-sign-in")
    on_page(driver, f"/account signed in as {name}", lambda u: u == f"{url}/account", "#display-name")


def sign_out(driver, url):
    driver.get(f"{url}/account")
    on_page(driver, "/account", lambda u: u == f"{url}/account", "#sign-out")
    click(driver, "#sign-out", "sign out")
    on_page(driver, "/account, signed out", lambda u: u == f"{url}/account", "#sign-in")


def continue_run(url, token, run, answers, instruction):
    body = {"expected_version": run["version"], "answers": answers, "instruction": instruction}
    status, run = base.request(f"{url}/api/v1/agent-runs/{run['run_id']}/continue", token, body,
                               {"Idempotency-Key": f"pages-{uuid.uuid4().hex[:16]}"})
    check(status == 200, f"continued ({status}: {str(run)[:200]})")
    return run


def runs(url, token):
    """A run waiting for its person's answer, and a completed run with a verified answer."""
    started = []
    for objective in (VAGUE, VAGUE):
        body = {"objective": objective, "database_scope": ["research_library"]}
        status, run = base.request(f"{url}/api/v1/agent-runs", token, body,
                                   {"Idempotency-Key": f"pages-{uuid.uuid4().hex[:16]}"})
        check(status == 201, f"run started ({status})")
        started.append(continue_run(url, token, run, [], "Search the research library."))
    waiting, done = started
    check(waiting["completion_status"] == "needs_input", f"a run waits for an answer ({waiting['completion_status']})")
    print(f"# the waiting run's authority: {waiting['terminal_authority_status']}")
    for _ in range(10):
        if done["recommended_next_action"] == "stop":
            break
        answers = [{"question_id": q["question_id"], "value": OBJECTIVE} for q in done["pending_questions"]]
        done = continue_run(url, token, done, answers, "Gather evidence from the research library and complete it.")
    check(done["terminal_authority_status"] == "authorized", f"a run completed with a verified answer ({done})")
    return waiting, done


def consent_url(url):
    """The development authorization server's authorize URL for a registered client."""
    redirect = f"http://127.0.0.1:{base.free_port()}/callback"
    status, client = base.call("POST", f"{url}/register", None, {
        "client_name": CLIENT, "redirect_uris": [redirect], "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]})
    check(status == 201, f"a client registered ({status}: {client})")
    challenge = base.b64url(hashlib.sha256(b"pages-verifier-" + b"x" * 40).digest())
    query = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect,
             "code_challenge": challenge, "code_challenge_method": "S256", "state": "pages-state",
             "scope": "helix.agent_runs.read helix.rooms.read offline_access"}
    import urllib.parse
    return f"{url}/authorize?{urllib.parse.urlencode(query)}", redirect


def main():
    data_dir = tempfile.mkdtemp(prefix="helix-pages-")
    port = base.free_port()
    url = f"http://127.0.0.1:{port}"
    env = base.server_env()
    # The embedded store is single-process: tokens and the policy before serve starts.
    owner = base.helix("dev-token", "--data-dir", data_dir, "--subject", OWNER, "--tenant", TENANT, "--scope", SCOPES,
                       env=env)
    base.helix("account", "policy", "--data-dir", data_dir, "--subject", OWNER, "--tenant", TENANT,
               "--developer", "true", env=env)
    proc, log = base.serve(data_dir, port)
    driver, sim = None, None
    try:
        base.wait_ready(url, proc)
        status, room = base.call("POST", f"{url}/api/v1/rooms", owner, {"name": ROOM},
                                 {"Idempotency-Key": "pages-room-0001"})
        check(status == 201, f"room created ({status})")
        room_id = room["room_id"]
        waiting, done = runs(url, owner)
        driver = base.chromium("1280,1000", page_load_timeout=30)

        # Signed out: the landing page, the sign-in, the provider's page, a refused sign-in.
        driver.get(f"{url}/")
        on_page(driver, "the landing page", lambda u: u == f"{url}/", "#landing")
        visit(driver, "landing")
        driver.get(f"{url}/account")
        on_page(driver, "/account signed out", lambda u: u == f"{url}/account", "#sign-in")
        visit(driver, "account-signed-out")
        click(driver, "#sign-in", "sign-in")
        on_page(driver, "the development provider", lambda u: u.startswith(f"{url}/dev-oidc/authorize?"), "#dev-sign-in")
        visit(driver, "dev-provider-sign-in")
        driver.get(f"{url}/account/callback?code=nothing&state=nothing")
        on_page(driver, "a refused sign-in", lambda u: "/account/callback" in u, "main h1")
        visit(driver, "sign-in-failed")
        driver.get(f"{url}/agent-access")
        on_page(driver, "/agent-access", lambda u: u == f"{url}/agent-access", "#resource")
        visit(driver, "agent-access")

        # The member signs in with a name, is invited by the owner, and joins.
        sign_in(driver, url, OWNER, OWNER_NAME)
        driver.get(f"{url}/rooms")
        on_page(driver, "/rooms", lambda u: u == f"{url}/rooms", "button.create-invite")
        click(driver, f"section.room[data-room-id='{room_id}'] button.create-invite", "create invite")
        on_page(driver, "the invite", lambda u: u == f"{url}/rooms/invite", "#invite-code")
        code = driver.find_element(By.ID, "invite-code").text

        def invite_names_its_room(d, layout):
            check(d.find_element(By.ID, "invite-room").text == ROOM, "the invite's heading names its room")
            check(ROOM in d.find_element(By.ID, "invite").text.split("\n", 1)[1], "the invite's words name its room")
            hidden_hashes(d, layout, "the invite page")

        visit(driver, "rooms-invite", invite_names_its_room)
        sign_out(driver, url)
        sign_in(driver, url, MEMBER, MEMBER_NAME)
        driver.get(f"{url}/rooms")
        on_page(driver, "/rooms of the member", lambda u: u == f"{url}/rooms", "#join-code")
        driver.find_element(By.ID, "join-code").send_keys(code)
        click(driver, "#join", "continue with the code")
        on_page(driver, "the join preview", lambda u: u == f"{url}/rooms/join/preview", "#accept-invite")
        visit(driver, "rooms-join-preview",
              lambda d, _: check(ROOM in d.find_element(By.ID, "join-heading").text, "the preview names the room"))
        click(driver, "#accept-invite", "accept and join")
        on_page(driver, "/rooms, joined", lambda u: u == f"{url}/rooms", "#rooms-done")
        visit(driver, "rooms-member")
        driver.get(f"{url}/chat")
        on_page(driver, "/chat", lambda u: u == f"{url}/chat", "#new-chat")
        visit(driver, "chat")
        base.click_rendered(driver, "new chat", lambda d: d.find_element(By.ID, "new-chat"))
        base.click_rendered(driver, "attach an agent run", lambda d: d.find_element(By.ID, "attach"))
        until(driver, "the claim handle", lambda d: d.find_element(By.ID, "claim-handle").text)
        visit(driver, "chat-claim", lambda d, _: check(
            re.match(r"^in \d+ min$", d.find_element(By.ID, "claim-expires").text),
            f"the claim's expiry is human ({d.find_element(By.ID, 'claim-expires').text!r})"))
        sign_out(driver, url)

        # The owner: the account, the rooms with the member by name, pairing with pickers.
        sign_in(driver, url, OWNER, OWNER_NAME)
        click(driver, "#allow-agents", "allow agents")
        on_page(driver, "the development provider (step-up)", lambda u: u.startswith(f"{url}/dev-oidc/authorize?"),
                "#dev-sign-in")
        click(driver, "#dev-sign-in", "dev-sign-in")
        on_page(driver, "/account with a binding", lambda u: u == f"{url}/account", 'tr.binding[data-status="active"]')

        def account_by_name(d, layout):
            check(d.find_element(By.ID, "display-name").text == OWNER_NAME, "the account shows the person's name")
            hidden_hashes(d, layout, "/account")
            details = d.find_element(By.ID, "account-ref-details")
            check(details.get_attribute("open") is None and "account:sha256:" in details.get_attribute("textContent"),
                  "the account hash is there on request (a closed <details>)")
            row = d.find_element(By.CSS_SELECTOR, "tr.binding td.binding-name").text
            check(OWNER_NAME in row and "sha256" not in row, f"the binding reads by name: {row!r}")

        visit(driver, "account", account_by_name)
        driver.get(f"{url}/rooms")
        on_page(driver, "/rooms of the owner", lambda u: u == f"{url}/rooms", "tr.member")

        def members_by_name(d, layout):
            names = [e.text for e in d.find_elements(By.CSS_SELECTOR, "tr.member td.member-name .person")]
            check(sorted(names) == sorted([OWNER_NAME, MEMBER_NAME]), f"members appear by name: {names}")
            check(ROOM in d.find_element(By.CSS_SELECTOR, f"section.room[data-room-id='{room_id}'] h2").text,
                  "the room by its name")
            hidden_hashes(d, layout, "/rooms")

        visit(driver, "rooms-owner", members_by_name)
        driver.get(f"{url}/account/room-connectors?room_id={room_id}")
        on_page(driver, "the pairing page", lambda u: u.startswith(f"{url}/account/room-connectors"), "#pair-form")
        pick = Select(driver.find_element(By.ID, "pair-room"))
        check(pick.first_selected_option.text == ROOM, "the pairing form picks the room by name")
        driver.find_element(By.ID, "pair-world").send_keys("overworld")
        driver.find_element(By.ID, "pair-button").click()
        until(driver, "paired", lambda d: d.find_element(By.ID, "connector-credential").text)
        credential = driver.find_element(By.ID, "connector-credential").text
        config = driver.find_element(By.ID, "connector-config").text
        driver.get(f"{url}/account/room-connectors")
        on_page(driver, "the pairing page with a pairing", lambda u: u == f"{url}/account/room-connectors",
                "#credential-form")

        def picked_not_typed(d, _):
            for field in ("pair-room", "credential-room", "region-room", "clear-room",
                          "credential-binding", "region-binding", "clear-binding"):
                check(d.find_element(By.ID, field).tag_name == "select", f"{field} is picked from a list")
            options = [o.text for o in Select(d.find_element(By.ID, "credential-binding")).options]
            check(f"{ROOM} \u00b7 world overworld" in options, f"the paired world by room and world name: {options}")

        visit(driver, "room-connectors", picked_not_typed)
        click(driver, "#rotate-button", "rotate (the picked room and world)")
        on_page(driver, "the rotation's confirmation", lambda u: u.endswith("/account/room-connectors/credential"),
                "#confirm-rotate")
        visit(driver, "room-connectors-confirm-rotate")

        # A connector reports players: the room page shows them; a revoke names the member.
        config_path = Path(data_dir) / "connector.json"
        config_path.write_text(config)
        sim = subprocess.Popen([base.HELIX_BIN, "connector-sim", "--config", str(config_path), "--players",
                                "Steve,Alex", "--interval-ms", "250"], stdout=open(Path(data_dir) / "sim.log", "w"),
                               stderr=subprocess.STDOUT, env={**env, "HELIX_CONNECTOR_CREDENTIAL": credential})

        def players_listed(d):
            d.get(f"{url}/rooms")
            return len(d.find_elements(By.CSS_SELECTOR, "tr.subject")) == 2

        until(driver, "the connector's players on /rooms", players_listed, timeout=60)
        on_page(driver, "/rooms with players", lambda u: u == f"{url}/rooms", "tr.subject")
        visit(driver, "rooms-owner-players")
        member_row = next(f"tr.member[data-account-ref='{r.get_attribute('data-account-ref')}']"
                          for r in driver.find_elements(By.CSS_SELECTOR, "tr.member")
                          if r.find_elements(By.CSS_SELECTOR, ".grant-authority"))
        click(driver, f"{member_row} .grant-authority", "grant authority")
        on_page(driver, "/rooms after the grant", lambda u: u == f"{url}/rooms", f"{member_row} .revoke-authority")
        click(driver, f"{member_row} .revoke-authority", "revoke authority")
        on_page(driver, "the revoke's confirmation", lambda u: u.endswith("/rooms/members/authority"),
                "#confirm-revoke-authority")
        visit(driver, "rooms-confirm-revoke", lambda d, layout: (
            check(d.find_element(By.ID, "revoke-member-name").text == MEMBER_NAME, "the confirmation names the member"),
            hidden_hashes(d, layout, "the revoke's confirmation")))
        driver.get(f"{url}/account/room-sources/claim")
        on_page(driver, "the claim page", lambda u: u == f"{url}/account/room-sources/claim", "#claim-form")
        visit(driver, "source-claim")

        # The runs: the list, a run waiting for an answer, a run with its answer.
        driver.get(f"{url}/runs")
        on_page(driver, "/runs", lambda u: u == f"{url}/runs", "#runs")

        def no_red_blocked(d, _):
            reds = d.execute_script("""return Array.from(document.querySelectorAll('.badge')).filter(function (b) {
              return /blocked/i.test(b.textContent); }).map(function (b) { return b.textContent; });""")
            check(not reds, f"no badge says blocked: {reds}")
            row = d.find_element(By.CSS_SELECTOR, f"tr.run[data-run-id='{waiting['run_id']}']").text
            check("needs your answer" in row, f"the waiting run reads 'needs your answer': {row!r}")

        visit(driver, "runs", no_red_blocked)
        driver.get(f"{url}/runs/{waiting['run_id']}")
        on_page(driver, "the waiting run", lambda u: u.endswith(waiting["run_id"]), "#timeline li.event")

        def answer_first(d, _):
            first = d.execute_script("var h = document.querySelector('main h1');"
                                     "var n = h.nextElementSibling; return n && n.id;")
            check(first == "answer", f"the first block after the title is the answer ({first})")

        def waiting_page(d, layout):
            answer_first(d, layout)
            check("needs your answer" in d.find_element(By.ID, "answer").text, "the answer block: needs your answer")
            check(d.find_element(By.ID, "completion").text == "needs your answer", "the completion badge too")
            no_red = d.execute_script("""return Array.from(document.querySelectorAll('.badge')).every(function (b) {
              return !/blocked/i.test(b.textContent); });""")
            check(no_red, "no badge says blocked")

        visit(driver, "run-needs-answer", waiting_page)
        driver.get(f"{url}/runs/{done['run_id']}")
        on_page(driver, "the completed run", lambda u: u.endswith(done["run_id"]), "#terminal-product")

        def answered_page(d, layout):
            answer_first(d, layout)
            block = d.find_element(By.ID, "answer")
            check(block.find_element(By.ID, "terminal-product").text.strip(), "the answer leads the page")
            cited = block.find_elements(By.CSS_SELECTOR, "#answer-evidence li.cited")
            check(cited and all(c.text.strip() for c in cited), f"its evidence beside it ({len(cited)} items)")
            times = layout["times"]
            check(times and all(RELATIVE.match(t["text"]) for t in times), f"relative times: {times[:2]}")

        visit(driver, "run-answered", answered_page)

        # The consent page of the development authorization server.
        authorize, redirect = consent_url(url)
        driver.get(authorize)
        on_page(driver, "the authorization sign-in", lambda u: u.startswith(f"{url}/authorize"), "#sign-in")
        visit(driver, "authorize-sign-in")
        for field, value in (("subject", OWNER), ("tenant", TENANT)):
            el = driver.find_element(By.ID, field)
            el.clear()
            el.send_keys(value)
        click(driver, "#sign-in", "sign in to authorize")
        on_page(driver, "the consent page", lambda u: u.startswith(f"{url}/authorize"), "#approve")
        host = redirect.split("/")[2]

        def consent(d, _):
            check(d.find_element(By.ID, "client-name").text == CLIENT, "the consent names the client")
            check(d.find_element(By.ID, "redirect-host").text == host, f"and where it runs ({host})")
            for li in d.find_elements(By.CSS_SELECTOR, "li.scope"):
                words = li.find_element(By.CSS_SELECTOR, ".scope-words").text
                ident = li.find_element(By.CSS_SELECTOR, ".scope-id").text
                check(words and "helix." not in words and "_" not in words and ident,
                      f"{ident}: in plain words beside its identifier ({words!r})")
            check("agents to act for this account" in d.find_element(By.ID, "approving-allows").text,
                  "what approving allows")

        visit(driver, "consent", consent)
        driver.get(f"{url}/authorize?client_id=nobody")
        on_page(driver, "an authorization refused", lambda u: "/authorize" in u, "main h1")
        visit(driver, "authorize-error")
        print(f"screenshots: {SHOTS}")
    except BaseException:
        base.report_failure(driver, log, data_dir, "pages-failure")
        raise
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(timeout=10)
        base.stop(driver, proc)


if __name__ == "__main__":
    main()
