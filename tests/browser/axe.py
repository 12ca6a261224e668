"""The checks every page the browser tests visit must pass, run by `on_page` (test_account.py)
each time a test arrives on a page, so every test file gets them:

- axe-core (npm `axe-core`, pinned in tests/browser/package.json, installed by
  tests/browser/run) injected through WebDriver: no `serious` or `critical` violation;
  lesser ones are printed.
- the keyboard: no positive `tabindex`, and pressing Tab reaches every visible button, link,
  input, select and textarea of the page.
- a screenshot of the page, numbered in visiting order, in the artifacts directory.

The pages' strict policy (no inline script) does not stop this: WebDriver's scripts are the
browser's own, evaluated outside the page's policy.
"""

import base64
import os
import re
import sys
from pathlib import Path

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

HERE = Path(__file__).resolve().parent
AXE_JS = Path(os.environ.get("HELIX_AXE_JS", HERE / "node_modules" / "axe-core" / "axe.min.js"))
BLOCKING = ("serious", "critical")
_source = None
_visits = {"n": 0}

RUN_AXE = """
var done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(function (r) {
  done(r.violations.map(function (v) {
    return {id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 5).map(function (n) { return n.target.join(" ") + " :: " + n.html.slice(0, 160); })};
  }));
}, function (e) { done({error: String(e)}); });
"""

# Every control a person must reach by keyboard, keyed by its place in the document (so a
# control a page script re-renders while we tab is still the same control).
CONTROLS = """
function key(el) {
  var parts = [];
  for (var e = el; e && e.nodeType === 1 && e !== document.documentElement; e = e.parentElement) {
    var i = 1; for (var s = e.previousElementSibling; s; s = s.previousElementSibling) i++;
    parts.unshift(e.tagName.toLowerCase() + ":" + i);
  }
  return parts.join(">");
}
function shown(el) {
  if (el.disabled || el.closest("[inert]")) return false;
  // Inside a closed <details> only its own <summary> is shown (the rest comes on request).
  var closed = el.closest("details:not([open])");
  if (closed && !(el.tagName === "SUMMARY" && el.parentElement === closed)) return false;
  var st = getComputedStyle(el);
  return el.getClientRects().length > 0 && st.visibility !== "hidden";
}
var all = Array.from(document.querySelectorAll(
  "a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]"));
var positive = all.filter(function (el) { return el.tabIndex > 0 || Number(el.getAttribute("tabindex")) > 0; })
  .map(function (el) { return el.outerHTML.slice(0, 120); });
var controls = all.filter(function (el) { return shown(el) && el.getAttribute("tabindex") !== "-1"; });
window.__helixSeen = {};
if (!window.__helixKeyed) {
  window.__helixKeyed = true;
  document.addEventListener("focusin", function (e) { if (window.__helixSeen) window.__helixSeen[key(e.target)] = true; });
}
if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
window.__helixScroll = [window.scrollX, window.scrollY];
return {positive: positive,
        controls: controls.map(function (el) {
          return {key: key(el), what: el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " " +
                  (el.textContent || el.value || el.name || "").trim().slice(0, 40)};
        })};
"""


def _axe_source():
    global _source
    if _source is None:
        if not AXE_JS.is_file():
            raise AssertionError(f"axe-core is not installed ({AXE_JS}): run tests/browser/run (npm ci)")
        _source = AXE_JS.read_text()
    return _source


def accessibility(driver, what):
    """axe-core on the current page: fails on a serious or critical violation."""
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        driver.execute_script(_axe_source())
    driver.set_script_timeout(60)
    found = driver.execute_async_script(RUN_AXE)
    if isinstance(found, dict):
        raise AssertionError(f"axe-core did not run on {what}: {found.get('error')}")
    blocking = [v for v in found if v["impact"] in BLOCKING]
    for v in found:
        if v["impact"] not in BLOCKING:
            print(f"# axe ({v['impact']}) on {what}: {v['id']}: {v['help']} {v['nodes'][:2]}")
    if blocking:
        lines = [f"  {v['impact']} {v['id']}: {v['help']}\n    " + "\n    ".join(v["nodes"]) for v in blocking]
        raise AssertionError(f"axe-core: {len(blocking)} serious/critical violation(s) on {what}:\n" + "\n".join(lines))
    print(f"ok - axe-core: no serious or critical violation on {what} ({len(found)} lesser)")


def keyboard(driver, what):
    """Tabbing reaches every visible control of the page; no positive tabindex."""
    page = driver.execute_script(CONTROLS)
    if page["positive"]:
        raise AssertionError(f"positive tabindex on {what}: {page['positive']}")
    want = {c["key"]: c["what"] for c in page["controls"]}
    # Twice round the page at most: the first Tab may start after wherever focus last was.
    presses = 2 * len(want) + 2
    chain = ActionChains(driver)
    for _ in range(presses):
        chain.send_keys(Keys.TAB)
    chain.perform()
    seen = driver.execute_script("return window.__helixSeen || {}")
    missed = [w for k, w in want.items() if k not in seen]
    if missed:
        raise AssertionError(f"not reachable by Tab on {what}: {missed}")
    # Leave the page as it was found: nothing focused, scrolled back (screenshots follow).
    driver.execute_script("if (document.activeElement) document.activeElement.blur();"
                          "window.scrollTo(window.__helixScroll[0], window.__helixScroll[1]);")
    print(f"ok - keyboard: Tab reaches all {len(want)} controls on {what}")


def screenshot(driver, what, artifacts):
    artifacts.mkdir(parents=True, exist_ok=True)
    _visits["n"] += 1
    test = Path(sys.argv[0]).stem.removeprefix("test_")
    slug = re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")[:60]
    path = artifacts / "pages" / f"{test}-{_visits['n']:02d}-{slug}.png"
    path.parent.mkdir(exist_ok=True)
    save_full_page(driver, path)


def save_full_page(driver, path):
    """A PNG of the whole page, not only the window (Chromium's own capture, through CDP)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip})
    Path(path).write_bytes(base64.b64decode(shot["data"]))


def audit(driver, what, artifacts):
    """Every check of a page the tests arrive on."""
    screenshot(driver, what, artifacts)
    accessibility(driver, what)
    keyboard(driver, what)
