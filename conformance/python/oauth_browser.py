"""The person's part of an OAuth authorization, in a real headless Chromium (Debian's
chromium + chromedriver, driven by Selenium): open the authorization URL a client printed,
sign in on the development sign-in page, untick scopes if asked, approve (or deny) on the
consent page, and follow the redirect to the client's loopback callback.

Used by the Python SDK tests (as their `redirect_handler`), and as a command by the other
real clients' scripts:

    python oauth_browser.py URL --until http://127.0.0.1:PORT/callback \
        [--subject S] [--tenant T] [--untick SCOPE]... [--deny]

prints one JSON line: `{"final_url", "consent_scopes", "client_shown"}`.
Env: CHROMIUM_BIN, CHROMEDRIVER_BIN, HELIX_BROWSER_ARTIFACTS (a screenshot on failure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")
WAIT_S = 30.0

# The selectors agreed with the development authorization server's pages.
SIGN_IN_SUBJECT = "input#subject[name=subject]"
SIGN_IN_TENANT = "input#tenant[name=tenant]"
SIGN_IN_SUBMIT = "button#sign-in"
SCOPE_BOXES = "input[type=checkbox][name=scope]"
APPROVE = "button#approve"
DENY = "button#deny"


def browser_available() -> bool:
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


@dataclass
class Authorization:
    """What the browser saw: where it ended, the scopes the consent page offered, and
    whether the consent page named the client."""

    final_url: str
    consent_scopes: list[str] = field(default_factory=list)
    client_shown: bool = False
    pages: list[str] = field(default_factory=list)

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.final_url).query).items()}


class Browser:
    """One headless Chromium; its cookies (the sign-in session) live as long as it does."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        os.environ.setdefault("SE_OFFLINE", "true")
        options = Options()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,1200"):
            options.add_argument(arg)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(WAIT_S)

    def close(self) -> None:
        self.driver.quit()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _find(self, css: str):
        return self.driver.find_elements("css selector", css)

    def authorize(
        self,
        url: str,
        until: str,
        subject: str,
        tenant: str,
        untick: tuple[str, ...] = (),
        approve: bool = True,
        client_name: str | None = None,
    ) -> Authorization:
        """Drive the pages from `url` until the browser is at a URL starting with `until`."""
        try:
            return self._authorize(url, until, subject, tenant, untick, approve, client_name)
        except BaseException:
            self._screenshot("oauth-failure")
            raise

    def _authorize(self, url, until, subject, tenant, untick, approve, client_name) -> Authorization:
        self.driver.get(url)
        seen = Authorization(final_url="")
        deadline = time.monotonic() + WAIT_S
        signed_in = consented = False
        while time.monotonic() < deadline:
            current = self.driver.current_url
            if current.startswith(until):
                seen.final_url = current
                return seen
            if not signed_in and self._find(SIGN_IN_SUBMIT):
                seen.pages.append("sign-in")
                for css, value in ((SIGN_IN_SUBJECT, subject), (SIGN_IN_TENANT, tenant)):
                    (box,) = self._find(css)
                    box.clear()
                    box.send_keys(value)
                self._find(SIGN_IN_SUBMIT)[0].click()
                signed_in = True
                continue
            if not consented and self._find(APPROVE):
                seen.pages.append("consent")
                boxes = self._find(SCOPE_BOXES)
                seen.consent_scopes = [b.get_attribute("value") for b in boxes]
                text = self.driver.find_element("tag name", "body").text
                seen.client_shown = client_name is not None and client_name in text
                for box in boxes:
                    if box.get_attribute("value") in untick and box.is_selected():
                        box.click()
                self._find(APPROVE if approve else DENY)[0].click()
                consented = True
                continue
            time.sleep(0.1)
        body = self.driver.find_element("tag name", "body").text[:500]
        raise TimeoutError(
            f"the browser never reached {until} (at {self.driver.current_url}; pages {seen.pages}; body {body!r})"
        )

    def _screenshot(self, name: str) -> None:
        folder = os.environ.get("HELIX_BROWSER_ARTIFACTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            try:
                self.driver.save_screenshot(str(Path(folder) / f"{name}-{int(time.time())}.png"))
            except Exception:  # a screenshot must never hide the real failure
                pass


class Callback:
    """A loopback redirect target (RFC 8252 §7.3) that records each redirect it receives."""

    def __init__(self, path: str = "/callback") -> None:
        hits: list[dict[str, str]] = []
        arrived = threading.Condition()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                parts = urlsplit(self.path)
                if parts.path != path:
                    self.send_error(404)
                    return
                with arrived:
                    hits.append({k: v[0] for k, v in parse_qs(parts.query).items()})
                    arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.end_headers()
                self.wfile.write(b"Signed in; you may close this window.")

            def log_message(self, *args: object) -> None:
                pass

        self._hits, self._arrived = hits, arrived
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int, timeout: float = WAIT_S) -> dict[str, str]:
        """The `count`-th redirect's query parameters (1-based), waiting for it."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self._hits) >= count, timeout):
                raise TimeoutError(f"no redirect number {count} reached {self.uri}")
            return self._hits[count - 1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--until", required=True, help="the redirect URI prefix that ends the walk")
    p.add_argument("--subject", default="conformance-client")
    p.add_argument("--tenant", default="tenant-conformance")
    p.add_argument("--untick", action="append", default=[])
    p.add_argument("--deny", action="store_true")
    p.add_argument("--client-name")
    args = p.parse_args(argv)
    with Browser() as browser:
        seen = browser.authorize(
            args.url,
            args.until,
            args.subject,
            args.tenant,
            tuple(args.untick),
            not args.deny,
            args.client_name,
        )
    print(json.dumps({"final_url": seen.final_url, "consent_scopes": seen.consent_scopes,
                      "client_shown": seen.client_shown, "pages": seen.pages}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
