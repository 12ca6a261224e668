"""MCP Apps (SEP-1865, extension `io.modelcontextprotocol/ui`) through the official MCP
Python SDK against a real `helix serve`.

A client that declares the extension (ClientSession(extensions=...), in the `initialize`
handshake or per request after `server/discover`) sees `_meta.ui.resourceUri` on the five
run tools, the `ui://` view in `resources/list`, and reads it as self-contained HTML
(`text/html;profile=mcp-app`) with `_meta.ui.csp` naming no external domain. A client that
does not declare it sees exactly the catalog of today: no `_meta.ui`, no resources.
"""

from __future__ import annotations

import copy
import json
import re
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
VIEW_URI = "ui://helix/run-view.html"
VIEW_TOOLS = [
    "helix_run_start",
    "helix_run_continue",
    "helix_run_inspect",
    "helix_run_fetch_evidence",
    "helix_run_list_events",
]
DECLARED = {EXTENSION: {"mimeTypes": [MIME]}}
METHOD_NOT_FOUND = -32601


@asynccontextmanager
async def session(
    helix: Any, extensions: dict[str, Any] | None, negotiate: str = "initialize", path: str = "/mcp"
) -> AsyncIterator[tuple[ClientSession, Any, list[httpx2.Response]]]:
    """A negotiated SDK session, the negotiation result, and the raw JSON responses."""
    wire: list[httpx2.Response] = []

    async def record(response: httpx2.Response) -> None:
        if response.request.method == "POST" and response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            await response.aread()
            wire.append(response)

    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {helix.tokens['full']}"},
        timeout=httpx2.Timeout(30.0, read=120.0),
        event_hooks={"response": [record]},
    ) as http:
        async with streamable_http_client(helix.base_url + path, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=120, extensions=extensions) as s:
                result = await (s.initialize() if negotiate == "initialize" else s.discover())
                yield s, result, wire


def raw_tools(wire: list[httpx2.Response]) -> list[dict[str, Any]]:
    bodies = [json.loads(r.content) for r in wire]
    lists = [b["result"]["tools"] for b in bodies if isinstance(b.get("result"), dict) and "tools" in b["result"]]
    assert lists, "no raw tools/list body captured"
    return lists[-1]


def without_ui(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tools = copy.deepcopy(tools)
    for t in tools:
        (t.get("_meta") or {}).pop("ui", None)
    return tools


async def assert_apps_surface(
    s: ClientSession, wire: list[httpx2.Response], not_found: int = -32002
) -> list[dict[str, Any]]:
    listing = await s.list_tools()
    by_name = {t.name: t for t in listing.tools}
    for name in VIEW_TOOLS:
        meta = by_name[name].meta or {}
        assert meta.get("ui") == {"resourceUri": VIEW_URI}, f"{name}: _meta.ui {meta.get('ui')!r}"
        assert "securitySchemes" in meta, f"{name}: the scopes copy is kept"
    others = [t.name for t in listing.tools if t.name not in VIEW_TOOLS and "ui" in (t.meta or {})]
    assert others == [], f"tools without a view carry _meta.ui: {others}"
    tools = raw_tools(wire)
    assert {t["name"] for t in tools if "ui" in (t.get("_meta") or {})} == set(VIEW_TOOLS)

    resources = await s.list_resources()
    assert [r.uri for r in resources.resources] == [VIEW_URI]
    listed = resources.resources[0]
    assert listed.mime_type == MIME and listed.name
    listed_ui = (listed.meta or {}).get("ui") or {}
    assert listed_ui.get("csp") == {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}

    read = await s.read_resource(VIEW_URI)
    assert len(read.contents) == 1
    content = read.contents[0]
    assert str(content.uri) == VIEW_URI and content.mime_type == MIME
    html = content.text
    assert html.startswith("<!DOCTYPE html>")
    csp = ((content.meta or {}).get("ui") or {}).get("csp")
    assert csp == listed_ui["csp"], f"resources/read _meta.ui.csp: {csp!r}"
    declared = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert declared, "the document enforces its own CSP"
    policy = declared.group(1)
    assert policy.startswith("default-src 'none'") and "unsafe" not in policy and "connect-src 'none'" in policy
    assert not re.search(r"https?://", html), "the view references no origin"
    for section in ("statuses", "budget", "timeline", "questions", "evidence", "terminal", "not-an-answer"):
        assert f'id="{section}"' in html, f"the view lacks #{section}"

    with pytest.raises(MCPError) as missing:
        await s.read_resource("ui://helix/no-such-view.html")
    assert missing.value.error.code == not_found, missing.value.error
    return tools


async def test_a_handshake_client_declaring_the_extension_gets_the_run_view(helix):
    async with session(helix, DECLARED) as (s, init, wire):
        caps = init.capabilities
        assert (caps.extensions or {}).get(EXTENSION) == {"mimeTypes": [MIME]}, caps
        assert caps.resources is not None, "resources are advertised with the extension"
        session_id = wire[0].headers.get("mcp-session-id") or ""
        assert session_id.startswith("helix-apps-"), f"handshake session id {session_id!r}"
        await assert_apps_surface(s, wire)
        # The tool results themselves are unchanged: what the host hands the view.
        started = await s.call_tool(
            "helix_run_start",
            {
                "idempotency_key": "conf-py-apps-start-0001",
                "request": {"objective": "Summarize the Casimir force measurements.", "database_scope": ["research_library"]},
            },
        )
        assert not started.is_error and started.structured_content["schema"] == "helix.agent_run.v1"


async def test_a_discover_client_declares_the_extension_per_request(helix):
    async with session(helix, DECLARED, negotiate="discover") as (s, discovered, wire):
        assert (discovered.capabilities.extensions or {}).get(EXTENSION) == {"mimeTypes": [MIME]}
        assert discovered.capabilities.resources is not None
        # 2026-07-28 reports an unknown resource as invalid params (the SDK's code per revision).
        await assert_apps_surface(s, wire, not_found=-32602)


async def test_clients_that_do_not_declare_it_see_todays_catalog(helix):
    async with session(helix, DECLARED) as (s, _, wire):
        await s.list_tools()
        with_apps = raw_tools(wire)
    for extensions, negotiate in [
        (None, "initialize"),
        (None, "discover"),
        ({EXTENSION: {}}, "initialize"),  # no mimeTypes: not the HTML profile
        ({EXTENSION: {"mimeTypes": ["text/html"]}}, "discover"),
        ({"io.modelcontextprotocol/other": {}}, "initialize"),
    ]:
        async with session(helix, extensions, negotiate) as (s, result, wire):
            caps = result.capabilities
            assert EXTENSION not in (caps.extensions or {}), (extensions, caps)
            assert caps.resources is None, f"resources advertised to {extensions}"
            assert "mcp-session-id" not in wire[0].headers, "no session id without the extension"
            await s.list_tools()
            tools = raw_tools(wire)
            assert all("ui" not in (t.get("_meta") or {}) for t in tools), extensions
            assert tools == without_ui(with_apps), "the catalog differs from today's beyond _meta.ui"
            for call in (s.list_resources(), s.read_resource(VIEW_URI)):
                with pytest.raises(MCPError) as refused:
                    await call
                assert refused.value.error.code == METHOD_NOT_FOUND, refused.value.error


async def test_the_device_check_front_has_no_view_and_advertises_nothing(helix):
    for negotiate in ("initialize", "discover"):
        async with session(helix, DECLARED, negotiate, path="/mcp/device-check") as (s, result, wire):
            assert EXTENSION not in (result.capabilities.extensions or {})
            assert result.capabilities.resources is None
            assert "mcp-session-id" not in wire[0].headers
            tools = (await s.list_tools()).tools
            assert [t.name for t in tools] == ["helix_environment_device_check"]
            assert "ui" not in (tools[0].meta or {})
            with pytest.raises(MCPError) as refused:
                await s.list_resources()
            assert refused.value.error.code == METHOD_NOT_FOUND
