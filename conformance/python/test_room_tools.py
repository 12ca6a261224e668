"""Shared Live Room tools through the official Python MCP SDK against `helix serve`.

The SDK validates every structured result against the tool's published outputSchema, so a
receipt that drifts from its schema fails here as it would in a real client.
"""

from __future__ import annotations

from typing import Any

import pytest

from test_mcp_conformance import (
    assert_false_flags,
    call_err,
    call_ok,
    key,
    mcp_session,
    security_scopes,
    start_request,
)

pytestmark = pytest.mark.anyio

ROOM_TOOLS = {
    "helix_room_list": ["helix.rooms.read"],
    "helix_room_inspect": ["helix.rooms.read"],
    "helix_room_create": ["helix.rooms.manage"],
    "helix_room_bind_run": ["helix.rooms.manage", "helix.agent_runs.write"],
    "helix_room_claim_chat_binding": ["helix.rooms.manage", "helix.agent_runs.write"],
    "helix_room_unbind_run": ["helix.rooms.manage", "helix.agent_runs.write"],
    "helix_room_unbind_chat": ["helix.rooms.manage", "helix.agent_runs.write"],
    "helix_room_command_request": ["helix.rooms.manage"],
}


async def test_room_tools_are_listed_with_their_scopes(helix):
    # A token without any room scope still sees the whole catalog.
    async with mcp_session(helix.mcp_url, helix.tokens["read_only"]) as (session, wire):
        listed = await session.list_tools()
        names = [t.name for t in listed.tools]
        for name in ROOM_TOOLS:
            assert name in names, f"{name} missing from tools/list: {names}"
        raw = next(m for m in wire if "result" in m and "tools" in m["result"])["result"]["tools"]
        for tool in raw:
            if tool["name"] not in ROOM_TOOLS:
                continue
            want = ROOM_TOOLS[tool["name"]]
            assert security_scopes(tool["securitySchemes"]) == want, tool["name"]
            assert security_scopes(tool["_meta"]["securitySchemes"]) == want, tool["name"]
            assert tool["inputSchema"].get("additionalProperties") is False, tool["name"]
            assert isinstance(tool.get("outputSchema"), dict), tool["name"]
        err, result = await call_err(session, "helix_room_list", {})
        assert err["code"] == "insufficient_scope", err
        assert "helix.rooms.read" in (result.meta or {}).get("mcp/www_authenticate", [""])[0]


async def test_a_room_and_a_run_binding_round_trip_through_the_sdk(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["rooms"]) as (session, _):
        create = {"idempotency_key": key("room"), "request": {"name": "Casimir bench"}}
        room = await call_ok(session, "helix_room_create", create)
        assert room["schema"] == "helix.room.v1" and room["role"] == "owner", room
        assert_false_flags(room, "room")
        assert await call_ok(session, "helix_room_create", create) == room, "an exact retry replays"
        listed = await call_ok(session, "helix_room_list", {})
        assert [r["room_id"] for r in listed["rooms"]] == [room["room_id"]]
        assert await call_ok(session, "helix_room_inspect", {"room_id": room["room_id"]}) == room

        run = await call_ok(session, "helix_run_start", {"idempotency_key": key("start"), "request": start_request()})
        bind = {"request": {"room_id": room["room_id"], "run_id": run["run_id"]}}
        binding: dict[str, Any] = await call_ok(session, "helix_room_bind_run", bind)
        assert binding["schema"] == "helix.room_run_binding.v1" and binding["binding_status"] == "active"
        assert (await call_ok(session, "helix_room_bind_run", bind))["binding_ref"] == binding["binding_ref"]
        other = await call_ok(session, "helix_room_create", {"idempotency_key": key("room"), "request": {"name": "Other"}})
        err, _ = await call_err(
            session, "helix_room_bind_run", {"request": {"room_id": other["room_id"], "run_id": run["run_id"]}}
        )
        assert err["code"] == "run_already_bound", err

        err, _ = await call_err(
            session, "helix_room_command_request", {"room_id": room["room_id"], "request": {"command": "say hi"}}
        )
        assert err["code"] == "command_execution_not_enabled", err
        handle = "hcc_" + "0" * 64
        err, _ = await call_err(
            session, "helix_room_claim_chat_binding", {"request": {"claim_handle": handle, "run_id": run["run_id"]}}
        )
        assert err["code"] == "claim_handle_invalid", err

        revoked = await call_ok(session, "helix_room_unbind_run", {"binding_ref": binding["binding_ref"]})
        assert revoked == {**revoked, "binding_ref": binding["binding_ref"], "binding_status": "revoked",
                           "revocation_status": "revoked"}
        assert run["run_id"] not in str(revoked) and room["room_id"] not in str(revoked)
        again = await call_ok(session, "helix_room_unbind_run", {"binding_ref": binding["binding_ref"]})
        assert again["revocation_status"] == "already_revoked"
        fresh = await call_ok(
            session, "helix_room_bind_run", {"request": {"room_id": other["room_id"], "run_id": run["run_id"]}}
        )
        assert fresh["binding_ref"] != binding["binding_ref"], "a replacement gets a new reference"
