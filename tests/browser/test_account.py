"""A person's path through the browser lane, in a real headless Chromium against a real
`helix serve`: open /account, sign in through the development OpenID provider, allow
agents, see the binding, use a bearer of that identity (REST and MCP), revoke it in the
page, see the bearer refused. Screenshots of each page go to the artifacts directory.

Usage: python tests/browser/test_account.py  (env: HELIX_BIN, HELIX_BROWSER_ARTIFACTS,
CHROMIUM_BIN, CHROMEDRIVER_BIN). Exits non-zero on the first failed check.
"""

import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import axe  # noqa: E402  (tests/browser/axe.py: the checks of every page)
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[2]
HELIX_BIN = os.environ.get("HELIX_BIN", str(ROOT / "target" / "debug" / "helix"))
ARTIFACTS = Path(os.environ.get("HELIX_BROWSER_ARTIFACTS", ROOT / "target" / "browser-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")
SUBJECT, TENANT = "browser-newcomer", "browser-tenant"
SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read"
# Longest wait for any one page or element to settle: generous, the test runs on loaded
# machines; a wait that passes returns as soon as its condition holds.
WAIT = 30
# Longest any one WebDriver command may take (axe-core's run is the slowest, bounded at 60 s
# by its own script timeout); Selenium's own default is to wait forever.
COMMAND_TIMEOUT = 120


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok - {what}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def bearer(data_dir):
    """An HS256 development bearer of the identity (what `helix dev-token` mints), minted
    here without linking anything: only the browser's "allow agents" may admit it."""
    secret = (Path(data_dir) / "local-hs256.secret").read_text().strip()
    now = int(time.time())
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"iss": "helix-local-issuer", "aud": "helix-local-resource", "sub": SUBJECT,
              "tenant_id": TENANT, "scope": SCOPES, "iat": now, "nbf": now, "exp": now + 600}
    signing = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64url(sig)


def call(method, url, token=None, body=None, headers=None):
    """One HTTP request (a JSON body, a bearer when `token`): (status, parsed JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def request(url, token, body, headers=None):
    return call("POST", url, token, body, headers)


def rest_start(base, token, key):
    body = {"objective": "What force did Lamoreaux measure?", "database_scope": ["research_library"]}
    return request(f"{base}/api/v1/agent-runs", token, body, {"Idempotency-Key": key})


def mcp_tools_list(base, token):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "browser-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/list"}
    return request(f"{base}/mcp", token, body, headers)


def server_env(extra_env=None):
    """The environment `helix serve` and the CLI run with here: this process's, without
    HELIX_ENV, plus `extra_env`."""
    env = {k: v for k, v in os.environ.items() if k != "HELIX_ENV"}
    env.update(extra_env or {})
    return env


def serve(data_dir, port, extra_env=None):
    """Starts `helix serve` on 127.0.0.1:`port` over `data_dir` (environment: server_env),
    its output in `data_dir`/serve.log. Returns (process, log file); wait_ready waits for it,
    report_failure prints the log's tail, stop ends it."""
    log = open(Path(data_dir) / "serve.log", "w")
    proc = subprocess.Popen([HELIX_BIN, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data_dir],
                            stdout=log, stderr=subprocess.STDOUT, env=server_env(extra_env))
    return proc, log


def helix(*args, env=None):
    """Runs the helix CLI with `args` (environment: `env`, or this process's) and returns its
    output, stripped; a failed command raises CalledProcessError."""
    return subprocess.run([HELIX_BIN, *args], capture_output=True, text=True, env=env, check=True).stdout.strip()


def helix_check(data_dir, *args):
    """Runs the helix CLI with `args` over `data_dir` (environment: server_env) as a check
    (`ok - helix <command> succeeded`, or a failure with its stderr's tail) and returns its
    output, stripped."""
    out = subprocess.run([HELIX_BIN, *args, "--data-dir", data_dir], env=server_env(), capture_output=True,
                         text=True)
    check(out.returncode == 0, f"helix {args[0]} succeeded: {out.stderr[-300:]}")
    return out.stdout.strip()


def chromium(window="1280,1000", page_load_timeout=60):
    """A headless Chromium (CHROMIUM through CHROMEDRIVER) with a `window` ("width,height")
    and a page load timeout in seconds. Every WebDriver command is bounded too (COMMAND_TIMEOUT):
    a command the browser never answers fails the test with its name instead of holding it."""
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.command_executor.client_config.timeout = COMMAND_TIMEOUT
    driver.set_page_load_timeout(page_load_timeout)
    return driver


def wait_ready(base, proc):
    deadline = time.monotonic() + 60  # a cold start on a loaded machine can be slow
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("helix serve exited early")
        try:
            with urllib.request.urlopen(f"{base}/.well-known/oauth-protected-resource", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("helix serve did not become ready")


def shot(driver, name, audit=True):
    """A named screenshot of the page as it stands; the page (in that state) passes the
    checks of tests/browser/axe.py too, unless this is the screenshot of a failure."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    axe.save_full_page(driver, path)
    check(path.stat().st_size > 0, f"screenshot {path.name}")
    if audit:
        axe.accessibility(driver, name)
        axe.keyboard(driver, name)


# What chromedriver answers when a command meets a document that a navigation is replacing
# (the command raced the navigation; the page is not known yet). Polls retry these; any other
# WebDriver error fails the test at once.
NAVIGATING = (
    "does not belong to the document",
    "no node with given id",
    "cannot find context with specified id",
    "execution context was destroyed",
    "inspected target navigated or closed",
    "frame was detached",
    "target frame detached",
    "timed out receiving message from renderer",
)


def navigating(exc):
    if isinstance(exc, StaleElementReferenceException):
        return True
    msg = (exc.msg or str(exc)).lower() if isinstance(exc, WebDriverException) else ""
    return any(m in msg for m in NAVIGATING)


def until(driver, what, read, ok=bool, timeout=WAIT):
    """Polls `read(driver)` until `ok(value)` holds and returns the value. A read that raced a
    navigation, or found no element yet, is retried; on timeout the test fails naming `what`
    and the last value (or error) seen. Every read re-finds its elements: no reference is
    held across a navigation."""
    deadline = time.monotonic() + timeout
    last = "nothing read"
    while True:
        try:
            value = read(driver)
            if ok(value):
                return value
            last = repr(value)
        except NoSuchElementException as e:
            last = f"no such element ({e.msg})"
        except WebDriverException as e:
            if not navigating(e):
                raise
            last = f"navigating ({(e.msg or '').splitlines()[0] if e.msg else e})"
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not so after {timeout}s; last seen: {last}")
        time.sleep(0.2)


def expect(driver, what, read, ok):
    """A page check through a wait: `ok(read())` must come to hold within WAIT seconds."""
    until(driver, what, read, ok)
    print(f"ok - {what}")


# One script, so the URL, the load state, the marker and the markup are all read from the
# same document (separate commands could straddle a navigation).
PAGE_STATE = """
return {url: document.URL, ready: document.readyState,
        marker: document.querySelector(arguments[0]) !== null,
        clicked: window.__helixClicked === true,
        html: document.documentElement.outerHTML};
"""


def on_page(driver, what, url_ok, marker):
    """Waits until the browser shows the expected page: its URL satisfies `url_ok`, it is fully
    loaded, and `marker` (a CSS selector of an element only that page, in that state, has) is
    present. A document `click` left is never the page arrived on (a form that posts back to
    its own address shows the same URL and markers until the new document replaces it).
    Returns the page state (url, html) read from that document."""
    state = until(
        driver,
        f"on {what}",
        lambda d: d.execute_script(PAGE_STATE, marker),
        lambda s: url_ok(s["url"]) and s["ready"] == "complete" and s["marker"] and not s["clicked"],
    )
    print(f"ok - on {what}")
    axe.audit(driver, what, ARTIFACTS)  # every page a test arrives on: axe-core, keyboard, screenshot
    return state


def click(driver, css, what):
    """Clicks the element `css` of the current, settled page, found afresh. If the click's own
    answer races the navigation it started, that is not an error: the caller's wait for the
    next page is the check that the click worked. The clicked document is marked, so
    `on_page` waits for the document that replaces it."""
    element = driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script("window.__helixClicked = true")
    try:
        element.click()
    except WebDriverException as e:
        if not navigating(e):
            raise
        print(f"# the click on {what} raced its navigation; the next page decides: {e.msg}")


def click_rendered(driver, what, find):
    """Clicks the element `find(driver)` returns on a page whose script re-renders it (the
    chat list): found afresh and clicked until the click lands, a stale element retried."""
    def attempt(d):
        find(d).click()
        return True
    until(driver, f"click {what}", attempt)


def texts(driver, css):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def statuses(driver):
    return [e.get_attribute("data-status") for e in driver.find_elements(By.CSS_SELECTOR, "tr.binding")]


def dev_provider_submit(driver, subject=None, tenant=None):
    """On the development provider's page: fills in `subject` and `tenant` (default: this
    module's SUBJECT and TENANT, read at the call) and signs in; the caller waits for where
    that leads."""
    for field, value in (("subject", subject or SUBJECT), ("tenant", tenant or TENANT)):
        el = driver.find_element(By.ID, field)
        el.clear()
        el.send_keys(value)
        until(driver, f"{field} field filled", lambda d: d.find_element(By.ID, field).get_attribute("value"),
              lambda v: v == value)
    click(driver, "#dev-sign-in", "dev-sign-in")


def dev_provider_login(driver, base, marker, what):
    """Signs in at the development provider (the page must be shown) and waits for /account
    in the state `marker` shows."""
    dev_provider_submit(driver)
    return on_page(driver, what, lambda u: u == f"{base}/account", marker)


def sign_in_as(driver, base, subject, tenant):
    """Signs `subject` of `tenant` in through the development provider, from /account."""
    driver.get(f"{base}/account")
    on_page(driver, f"/account, signed out ({subject})", lambda u: u == f"{base}/account", "#sign-in")
    click(driver, "#sign-in", "sign-in")
    on_page(driver, "the development provider", lambda u: u.startswith(f"{base}/dev-oidc/authorize?"), "#dev-sign-in")
    dev_provider_submit(driver, subject, tenant)
    on_page(driver, f"/account after sign-in ({subject})", lambda u: u == f"{base}/account", "#account-ref")


def report_failure(driver, log, data_dir, name):
    """On a failed test: a screenshot of where the browser stood and the server log's tail."""
    if driver is not None:
        try:
            shot(driver, name, audit=False)
        except Exception:
            pass
    log.flush()
    print((Path(data_dir) / "serve.log").read_text()[-3000:], file=sys.stderr)


def stop(driver, proc):
    """Closes the browser and stops `helix serve`, whatever happened."""
    if driver is not None:
        driver.quit()
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def main():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in [*ARTIFACTS.glob("*.png"), *ARTIFACTS.glob("pages/*.png")]:
        old.unlink()  # only this run's screenshots remain
    data_dir = tempfile.mkdtemp(prefix="helix-browser-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc, log = serve(data_dir, port)
    driver = None
    try:
        wait_ready(base, proc)
        driver = chromium("1280,1000", page_load_timeout=60)

        account = f"{base}/account"
        at_account = lambda u: u == account  # noqa: E731
        at_provider = lambda u: u.startswith(f"{base}/dev-oidc/authorize?")  # noqa: E731
        active_row, revoked_row = 'tr.binding[data-status="active"]', 'tr.binding[data-status="revoked"]'

        # The landing page: what this is and where to go, signed out.
        driver.get(f"{base}/")
        page = on_page(driver, "the landing page", lambda u: u == f"{base}/", "#landing")
        links = {e.get_attribute("id"): e.get_attribute("href")
                 for e in driver.find_elements(By.CSS_SELECTOR, "ul.landing-links a[id]")}
        check(links.get("landing-sign-in") == account and links.get("landing-agent-access") == f"{base}/agent-access"
              and links.get("landing-runs") == f"{base}/runs" and links.get("landing-api") == f"{base}/openapi.json",
              f"landing links to sign in, agent access, runs, the API description: {links}")
        shot(driver, "00-landing")
        click(driver, "#landing-agent-access", "the agent-access link")
        page = on_page(driver, "the agent-access page", lambda u: u == f"{base}/agent-access", "#resource")
        check("Connect an agent to Helix" in page["html"], "agent-access page")
        expect(driver, "resource URL shown", lambda d: d.find_element(By.ID, "resource").text,
               lambda t: t == f"{base}/mcp")
        for client in ("codex", "codex-rooms", "claude-code", "chatgpt", "openai-responses", "gemini-interactions",
                       "gemini-cli"):
            section = driver.find_element(By.ID, f"client-{client}")
            check(section.is_displayed() and f"{base}/mcp" in section.text, f"agent-access shows {client} with this URL")
        codex = driver.find_element(By.ID, "client-codex").text
        check(all(f in codex for f in ("oauth_resource", "scopes", "enabled_tools", "tool_timeout_sec",
                                        "codex mcp login helix\n")), "the Codex section configures OAuth")
        # The second Codex profile, labelled apart: rooms, chat and the player, with their scope.
        labels = {c: driver.find_element(By.ID, f"client-{c}-name").text for c in ("codex", "codex-rooms")}
        check(labels["codex"] == "Codex: runs" and labels["codex-rooms"] == "Codex: runs + rooms + player",
              f"the two Codex profiles are labelled: {labels}")
        rooms = driver.find_element(By.ID, "client-codex-rooms").text
        check(all(f in rooms for f in ("[mcp_servers.helix_rooms]", '"helix.rooms.manage"', '"helix_room_create"',
                                        '"helix_room_claim_chat_binding"', '"helix_environment_subject_select"',
                                        '"helix_minecraft_player_action"', "codex mcp login helix_rooms")),
              "the rooms profile enables rooms, chat and the player and asks for their scopes")
        check('"helix.rooms.manage"' not in codex and '"helix_room_create"' not in codex,
              "the first profile stays the contract's (no room management)")
        check('require_approval: "always"' in driver.find_element(By.ID, "client-openai-responses").text,
              "Responses requires approval")
        check(bearer(data_dir) not in page["html"] and "eyJ" not in page["html"], "no token on the agent-access page")
        shot(driver, "01-agent-access")

        driver.get(account)
        on_page(driver, "/account, signed out", at_account, "#sign-in")
        shot(driver, "02-account-signed-out")
        click(driver, "#sign-in", "sign-in")
        on_page(driver, "the development provider", at_provider, "#dev-sign-in")
        shot(driver, "03-dev-provider-login")
        page = dev_provider_login(driver, base, "#account-ref", "/account after sign-in")
        expect(driver, "opaque account reference", lambda d: d.find_element(By.ID, "account-ref").get_attribute("textContent"),
               lambda t: t.startswith("account:sha256:"))
        expect(driver, "oauth_ready is no before allowing agents",
               lambda d: d.find_element(By.ID, "oauth-ready").text, lambda t: t == "no")
        check(SUBJECT not in page["html"] and TENANT not in page["html"], "no subject or tenant on the page")
        shot(driver, "04-account-signed-in")

        token = bearer(data_dir)
        status, body = rest_start(base, token, "browser-before-0001")
        check(status == 403 and body["error"]["code"] == "account_not_linked", "bearer refused before allowing agents")

        click(driver, "#allow-agents", "allow-agents")
        on_page(driver, "the development provider (step-up)", at_provider, "#dev-sign-in")
        shot(driver, "05-step-up-login")
        dev_provider_login(driver, base, active_row, "/account with an active binding")
        expect(driver, "one active binding listed", statuses, lambda s: s == ["active"])
        expect(driver, "oauth_ready is yes", lambda d: d.find_element(By.ID, "oauth-ready").text,
               lambda t: t == "yes")
        shot(driver, "06-binding-active")

        status, body = rest_start(base, token, "browser-after-0001")
        check(status == 201, f"bearer admitted on REST after allowing agents ({status})")
        status, body = mcp_tools_list(base, token)
        check(status == 200 and len(body["result"]["tools"]) > 0, f"bearer admitted on MCP ({status})")

        click(driver, f"{active_row} button.revoke", "revoke")
        # Revoke asks first, on the server: nothing is revoked until confirmed.
        on_page(driver, "the revoke confirmation", lambda u: u == f"{base}/account/agent-bindings/revoke",
                "#confirm-revoke-binding")
        expect(driver, "still active before the confirmation", statuses, lambda s: s == ["active"])
        shot(driver, "07-revoke-confirmation")
        click(driver, "#confirm-revoke-binding-button", "confirm the revoke")
        on_page(driver, "/account with the binding revoked", at_account, revoked_row)
        expect(driver, "the binding shows revoked", statuses, lambda s: s == ["revoked"])
        expect(driver, "no revoke button left", lambda d: texts(d, "button.revoke"), lambda t: t == [])
        expect(driver, "oauth_ready is no again", lambda d: d.find_element(By.ID, "oauth-ready").text,
               lambda t: t == "no")
        shot(driver, "07-binding-revoked")

        status, body = rest_start(base, token, "browser-revoked-0001")
        check(status == 403 and body["error"]["code"] == "account_not_linked", "bearer refused on REST after revoke")
        status, body = mcp_tools_list(base, token)
        check(status == 403, f"bearer refused on MCP after revoke ({status})")

        click(driver, "#sign-out", "sign-out")
        on_page(driver, "/account, signed out again", at_account, "#sign-in")
        expect(driver, "signed out", lambda d: (len(d.find_elements(By.ID, "sign-in")),
                                                len(d.find_elements(By.ID, "account-ref"))),
               lambda n: n == (1, 0))
        shot(driver, "08-signed-out")

        # A callback this browser never started (no sign-in cookie, unknown state) is refused
        # on a page, with a way back: not a JSON body in the browser.
        driver.get(f"{base}/account/callback?code=stale&state=not-a-live-intent")
        on_page(driver, "the sign-in failure page", lambda u: u.startswith(f"{base}/account/callback?"),
                "#sign-in-error")
        expect(driver, "the failure names its code and reason",
               lambda d: (d.find_element(By.ID, "sign-in-error").get_attribute("data-code"),
                          d.find_element(By.ID, "sign-in-error").get_attribute("data-reason")),
               lambda t: t == ("sign_in_failed", "state"))
        shot(driver, "09-sign-in-failed")
        click(driver, "#back-to-account", "back to the account")
        on_page(driver, "/account from the failure page", at_account, "#sign-in")
        print(f"browser test passed; screenshots in {ARTIFACTS}")
    except Exception:
        report_failure(driver, log, data_dir, "zz-failure")
        raise
    finally:
        stop(driver, proc)


if __name__ == "__main__":
    main()
