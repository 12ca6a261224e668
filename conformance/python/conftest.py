from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helix_server import HelixServer  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def helix():
    """A fresh `helix serve` (own temp data dir, own free port) per test; always stopped."""
    server = HelixServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        server = item.funcargs.get("helix")
        if isinstance(server, HelixServer):
            report.sections.append(("helix serve log (tail)", server.log_tail()))
