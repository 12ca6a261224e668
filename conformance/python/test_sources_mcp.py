"""Room-source tools on `/mcp` and the one-tool Device Check server on
`/mcp/device-check`, driven by the official MCP Python SDK against a real `helix serve`.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest

from helix_server import SUBJECT, TENANT, HelixServer, helix_bin
from test_mcp_conformance import call_ok, mcp_session, structured

pytestmark = pytest.mark.anyio

ROOM_SCOPE = "helix.rooms.read helix.rooms.manage helix.room_sources.manage"


def developer(server: HelixServer) -> None:
    server.tokens["rooms"] = server.mint(ROOM_SCOPE)
    server.tokens["reader"] = server.mint("helix.rooms.read")
    subprocess.run(
        [str(helix_bin()), "account", "policy", "--data-dir", str(server.data_dir),
         "--subject", SUBJECT, "--tenant", TENANT, "--developer", "true"],
        capture_output=True, timeout=60, check=True,
    )


@pytest.fixture
def rooms():
    server = HelixServer()
    server.start(prepare=developer)
    try:
        yield server
    finally:
        server.stop()


def rest(server: HelixServer, path: str, body: dict[str, Any], key: str) -> dict[str, Any]:
    import urllib.request

    req = urllib.request.Request(f"{server.base_url}{path}", data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {server.tokens['rooms']}")
    req.add_header("Content-Type", "application/json")
    req.add_header("Idempotency-Key", key)
    with urllib.request.urlopen(req, timeout=30) as res:
        return json.loads(res.read())


async def test_source_tools_create_and_list_without_any_credential(rooms: HelixServer) -> None:
    room = rest(rooms, "/api/v1/rooms", {"name": "SDK room"}, f"sdk-room-{uuid.uuid4().hex}")
    async with mcp_session(rooms.mcp_url, rooms.tokens["rooms"]) as (session, wire):
        listed = await session.list_tools()
        names = [t.name for t in listed.tools]
        assert "helix_room_source_list" in names and "helix_room_source_create" in names
        raw = next(m for m in wire if "tools" in m.get("result", {}))["result"]["tools"]
        create = next(t for t in raw if t["name"] == "helix_room_source_create")
        assert create["securitySchemes"] == [{"type": "oauth2", "scopes": ["helix.room_sources.manage"]}]
        assert set(create["inputSchema"]["required"]) == {"room_id", "idempotency_key", "request"}

        args = {"room_id": room["room_id"], "idempotency_key": f"sdk-src-{uuid.uuid4().hex}",
                "request": {"adapter_profile": "minecraft", "world_id": "overworld"}}
        created = await call_ok(session, "helix_room_source_create", args)
        delivery = created["credential_delivery"]
        assert delivery["bearer_included"] is False and delivery["plugin_config_included"] is False
        assert delivery["claim_handle"].startswith("hsc_")
        assert created["source"]["status"] == "awaiting_claim"
        listing = await call_ok(session, "helix_room_source_list", {"room_id": room["room_id"]})
        assert [s["source_id"] for s in listing["sources"]] == [created["source"]["source_id"]]
        assert "hsc_" not in json.dumps(listing) and "hsb_" not in json.dumps(listing)

        bad = await session.call_tool("helix_room_source_create", {**args, "idempotency_key": f"sdk-src-{uuid.uuid4().hex}",
                                                                   "request": {"adapter_profile": "factorio", "world_id": "w"}})
        assert bad.is_error and structured(bad)["error"]["code"] == "invalid_request"


async def test_device_check_lists_exactly_one_tool_and_reports_health(rooms: HelixServer) -> None:
    room = rest(rooms, "/api/v1/rooms", {"name": "SDK room"}, f"sdk-room-{uuid.uuid4().hex}")
    rest(rooms, f"/api/v1/rooms/{room['room_id']}/sources", {"adapter_profile": "fixture", "world_id": "demo"},
         f"sdk-src-{uuid.uuid4().hex}")
    async with mcp_session(f"{rooms.base_url}/mcp/device-check", rooms.tokens["reader"]) as (session, wire):
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["helix_environment_device_check"]
        raw = next(m for m in wire if "tools" in m.get("result", {}))["result"]["tools"]
        assert raw[0]["securitySchemes"] == [{"type": "oauth2", "scopes": ["helix.rooms.read"]}]
        assert raw[0]["annotations"]["readOnlyHint"] is True
        report = await call_ok(session, "helix_environment_device_check", {})
        assert report["schema"] == "helix.environment_device_check.v1"
        [health] = [r for r in report["rooms"] if r["room_id"] == room["room_id"]]
        [source] = health["sources"]
        assert source["adapter_profile"] == "fixture" and source["registered"] is False
        assert source["freshness"] == "no_observations"
        assert "hsc_" not in json.dumps(report) and "hsb_" not in json.dumps(report)
        # Nothing else is reachable through this server.
        with pytest.raises(Exception):
            await session.call_tool("helix_run_start", {"idempotency_key": "x" * 10, "request": {"objective": "x"}})
