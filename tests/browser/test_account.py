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

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
HELIX_BIN = os.environ.get("HELIX_BIN", str(ROOT / "target" / "debug" / "helix"))
ARTIFACTS = Path(os.environ.get("HELIX_BROWSER_ARTIFACTS", ROOT / "target" / "browser-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")
SUBJECT, TENANT = "browser-newcomer", "browser-tenant"
SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read"


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


def request(url, token, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


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


def wait_ready(base, proc):
    for _ in range(300):
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


def shot(driver, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    check(driver.save_screenshot(str(path)), f"screenshot {path.name}")


def click_and_wait(driver, element, url_ok):
    """Clicks and waits until the old page is gone and the URL satisfies `url_ok`
    (a form post may go through several redirects before the page settles)."""
    element.click()
    WebDriverWait(driver, 20).until(EC.staleness_of(element))
    WebDriverWait(driver, 20).until(lambda d: url_ok(d.current_url) and d.execute_script("return document.readyState") == "complete")


def dev_provider_login(driver, base):
    check(driver.current_url.startswith(f"{base}/dev-oidc/authorize?"), "at the development provider")
    for field, value in (("subject", SUBJECT), ("tenant", TENANT)):
        el = driver.find_element(By.ID, field)
        el.clear()
        el.send_keys(value)
    click_and_wait(driver, driver.find_element(By.ID, "dev-sign-in"), lambda u: u == f"{base}/account")


def main():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()  # only this run's screenshots remain
    data_dir = tempfile.mkdtemp(prefix="helix-browser-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "HELIX_ENV"}
    log = open(Path(data_dir) / "serve.log", "w")
    proc = subprocess.Popen([HELIX_BIN, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data_dir],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    driver = None
    try:
        wait_ready(base, proc)
        options = Options()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        driver.set_page_load_timeout(30)

        driver.get(f"{base}/agent-access")
        check("Connect an agent to Helix" in driver.page_source, "agent-access page")
        check(driver.find_element(By.ID, "resource").text == f"{base}/mcp", "resource URL shown")
        shot(driver, "01-agent-access")

        driver.get(f"{base}/account")
        shot(driver, "02-account-signed-out")
        at_provider = lambda u: u.startswith(f"{base}/dev-oidc/authorize?")  # noqa: E731
        click_and_wait(driver, driver.find_element(By.ID, "sign-in"), at_provider)
        shot(driver, "03-dev-provider-login")
        dev_provider_login(driver, base)
        check(driver.current_url == f"{base}/account", "back on /account after sign-in")
        check(driver.find_element(By.ID, "account-ref").text.startswith("account:sha256:"), "opaque account reference")
        check(driver.find_element(By.ID, "oauth-ready").text == "no", "oauth_ready is no before allowing agents")
        check(SUBJECT not in driver.page_source and TENANT not in driver.page_source, "no subject or tenant on the page")
        shot(driver, "04-account-signed-in")

        token = bearer(data_dir)
        status, body = rest_start(base, token, "browser-before-0001")
        check(status == 403 and body["error"]["code"] == "account_not_linked", "bearer refused before allowing agents")

        click_and_wait(driver, driver.find_element(By.ID, "allow-agents"), at_provider)
        shot(driver, "05-step-up-login")
        dev_provider_login(driver, base)
        check(driver.current_url == f"{base}/account", "back on /account after allowing agents")
        rows = driver.find_elements(By.CSS_SELECTOR, "tr.binding")
        check(len(rows) == 1 and rows[0].get_attribute("data-status") == "active", "one active binding listed")
        check(driver.find_element(By.ID, "oauth-ready").text == "yes", "oauth_ready is yes")
        shot(driver, "06-binding-active")

        status, body = rest_start(base, token, "browser-after-0001")
        check(status == 201, f"bearer admitted on REST after allowing agents ({status})")
        status, body = mcp_tools_list(base, token)
        check(status == 200 and len(body["result"]["tools"]) > 0, f"bearer admitted on MCP ({status})")

        click_and_wait(driver, rows[0].find_element(By.CSS_SELECTOR, "button.revoke"), lambda u: u == f"{base}/account")
        check(driver.current_url == f"{base}/account", "back on /account after revoking")
        rows = driver.find_elements(By.CSS_SELECTOR, "tr.binding")
        check(rows[0].get_attribute("data-status") == "revoked", "the binding shows revoked")
        check(driver.find_element(By.ID, "oauth-ready").text == "no", "oauth_ready is no again")
        shot(driver, "07-binding-revoked")

        status, body = rest_start(base, token, "browser-revoked-0001")
        check(status == 403 and body["error"]["code"] == "account_not_linked", "bearer refused on REST after revoke")
        status, body = mcp_tools_list(base, token)
        check(status == 403, f"bearer refused on MCP after revoke ({status})")

        click_and_wait(driver, driver.find_element(By.ID, "sign-out"), lambda u: u == f"{base}/account")
        check(len(driver.find_elements(By.ID, "sign-in")) == 1, "signed out")
        shot(driver, "08-signed-out")
        print(f"browser test passed; screenshots in {ARTIFACTS}")
    except Exception:
        if driver is not None:
            try:
                shot(driver, "zz-failure")
            except Exception:
                pass
        log.flush()
        print((Path(data_dir) / "serve.log").read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        if driver is not None:
            driver.quit()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
