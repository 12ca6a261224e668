"""Helix MCP surface driven by the official MCP Python SDK (PyPI `mcp`).

Every test starts its own `helix serve` (fresh data dir, free port), mints its
tokens with `helix dev-token`, talks to `POST /mcp` through
`mcp.client.streamable_http.streamable_http_client` + `mcp.ClientSession`, and
stops the server afterwards.
"""

from __future__ import annotations

import json
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

RUN_TOOLS = [
    "helix_run_start",
    "helix_run_continue",
    "helix_run_cancel",
    "helix_run_inspect",
    "helix_run_fetch_evidence",
    "helix_run_list_events",
]

# docs/wire.md, "MCP tools": scope and argument names per tool.
TOOL_SCOPE = {
    "helix_run_start": "helix.agent_runs.write",
    "helix_run_continue": "helix.agent_runs.write",
    "helix_run_cancel": "helix.agent_runs.write",
    "helix_run_inspect": "helix.agent_runs.read",
    "helix_run_fetch_evidence": "helix.agent_runs.read",
    "helix_run_list_events": "helix.agent_runs.read",
}
TOOL_ARGS = {
    "helix_run_start": ["idempotency_key", "request"],
    "helix_run_continue": ["run_id", "idempotency_key", "request"],
    "helix_run_cancel": ["run_id", "idempotency_key", "request"],
    "helix_run_inspect": ["run_id"],
    "helix_run_fetch_evidence": ["run_id"],
    "helix_run_list_events": ["run_id", "after_seq", "limit"],
}
TOOL_REQUIRED_ARGS = {
    name: [a for a in args if a not in ("after_seq", "limit")] for name, args in TOOL_ARGS.items()
}

FALSE_FLAGS = ("answer_authority", "assistant_answer", "terminal_eligible", "raw_content_included")
TERMINAL_COMPLETION = {"completed", "failed", "budget_exhausted", "cancelled"}
TERMINAL_LIFECYCLE = {"completed", "failed", "cancelled"}

COVERED_OBJECTIVE = (
    "Summarize the measured Casimir force between parallel plates, including the "
    "Lamoreaux 1997 torsion pendulum measurement and the sphere-plate geometry with "
    "the proximity force approximation."
)
UNCOVERED_OBJECTIVE = "List the opening hours of the municipal swimming pool in a fictional town."


def key(prefix: str) -> str:
    return f"conf-py-{prefix}-{uuid.uuid4().hex}"


def start_request(
    objective: str = COVERED_OBJECTIVE, max_steps: int = 8, contract: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": objective,
        "constraints": ["Use only the research library."],
        "database_scope": ["research_library"],
        "budget": {"max_steps": max_steps, "expires_in_seconds": 3600},
    }
    if contract is not None:
        body["completion_contract"] = contract
    return body


# A contract the sample corpus cannot satisfy in one turn (200 is the documented maximum):
# the run stays continuable, so a stale expected_version can be tested on a live run.
UNSATISFIABLE_CONTRACT = {"min_evidence_refs": 200}


@asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[tuple[ClientSession, list[dict[str, Any]]]]:
    """An initialized SDK session plus a log of the raw JSON-RPC bodies the SDK received.

    The SDK's pydantic `Tool` model drops fields it does not know (such as the
    standard `securitySchemes` tool field), so the raw bodies are kept to check
    what the server actually put on the wire.
    """
    wire: list[dict[str, Any]] = []

    async def record(response: httpx2.Response) -> None:
        ctype = response.headers.get("content-type", "")
        if response.request.method == "POST" and ctype.startswith("application/json"):
            await response.aread()
            try:
                wire.append(json.loads(response.content))
            except ValueError:
                pass

    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=180.0),
        event_hooks={"response": [record]},
    ) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=180) as session:
                init = await session.initialize()
                assert init.protocol_version, "initialize returned no protocolVersion"
                yield session, wire


def structured(result: Any) -> dict[str, Any]:
    sc = result.structured_content
    assert isinstance(sc, dict), f"structured_content is not an object: {sc!r}"
    return sc


async def call_ok(session: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, args)
    sc = result.structured_content
    assert not result.is_error, f"{name} returned isError: {json.dumps(sc, indent=1)}"
    sc = structured(result)
    # Spec: successful calls return both text JSON and structuredContent.
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    assert texts, f"{name}: no text content block"
    assert json.loads(texts[0]) == sc, f"{name}: text content JSON differs from structuredContent"
    return sc


async def call_err(session: ClientSession, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    result = await session.call_tool(name, args)
    sc = structured(result)
    assert result.is_error, f"{name}: expected isError, got success: {json.dumps(sc, indent=1)}"
    assert sc.get("schema") == "helix.agent_api.error.v1", f"error envelope schema: {sc.get('schema')!r}"
    err = sc.get("error")
    assert isinstance(err, dict) and isinstance(err.get("code"), str), f"no error.code in {sc!r}"
    assert_false_flags(sc, f"{name} error result")
    return err, result


def assert_false_flags(obj: dict[str, Any], what: str) -> None:
    for flag in FALSE_FLAGS:
        assert flag in obj, f"{what}: flag {flag} missing"
        assert obj[flag] is False, f"{what}: {flag} expected false, got {obj[flag]!r}"


def assert_run(run: dict[str, Any]) -> None:
    assert run.get("schema") == "helix.agent_run.v1", f"run schema: {run.get('schema')!r}"
    for f in (
        "run_id",
        "version",
        "lifecycle_status",
        "completion_status",
        "terminal_authority_status",
        "pending_questions",
        "recommended_next_action",
    ):
        assert f in run, f"run field {f} missing: {sorted(run)}"
    assert isinstance(run["version"], int) and run["version"] >= 1
    assert run["recommended_next_action"] in ("continue", "answer_questions", "wait", "stop"), run[
        "recommended_next_action"
    ]
    assert_false_flags(run, f"run {run['run_id']} v{run['version']}")


def is_terminal(run: dict[str, Any]) -> bool:
    return run["completion_status"] in TERMINAL_COMPLETION or run["lifecycle_status"] in TERMINAL_LIFECYCLE


def continue_request(run: dict[str, Any]) -> dict[str, Any]:
    answers = []
    if run["completion_status"] == "needs_input":
        answers = [
            {"question_id": q["question_id"], "value": "Use the research library sources; SI units."}
            for q in run.get("pending_questions") or []
        ]
    return {
        "expected_version": run["version"],
        "instruction": "Gather evidence from the research library and complete the objective.",
        "answers": answers,
    }


async def list_all_events(session: ClientSession, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = 0
    for _ in range(100):
        page = await call_ok(
            session, "helix_run_list_events", {"run_id": run_id, "after_seq": after, "limit": 200}
        )
        assert page.get("schema") == "helix.agent_run.event_page.v1", page.get("schema")
        assert page.get("run_id") == run_id
        assert_false_flags(page, f"event page after {after}")
        for e in page["events"]:
            assert_false_flags(e, f"event {e.get('seq')}")
        events.extend(page["events"])
        if not page.get("has_more"):
            break
        assert page["next_after_seq"] > after, "event paging does not advance"
        after = page["next_after_seq"]
    return events


def security_scopes(schemes: Any) -> list[str]:
    assert isinstance(schemes, list) and schemes, f"securitySchemes is not a non-empty list: {schemes!r}"
    scopes: list[str] = []
    for s in schemes:
        assert isinstance(s, dict), f"security scheme is not an object: {s!r}"
        if s.get("type") == "oauth2":
            scopes.extend(s.get("scopes") or [])
    assert scopes, f"no oauth2 scheme with scopes in {schemes!r}"
    return scopes


# (a) ---------------------------------------------------------------------------------------------


async def test_initialize_and_tools_list(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, wire):
        listing = await session.list_tools()
        listing_again = await session.list_tools()
        names = [t.name for t in listing.tools]
        assert names == [t.name for t in listing_again.tools], "tools/list order is not stable"
        for name in RUN_TOOLS:
            assert name in names, f"{name} missing from tools/list: {names}"
        run_names = [n for n in names if n in RUN_TOOLS]
        assert len(run_names) == len(set(run_names)) == 6, f"duplicate run tools: {run_names}"

        raw_lists = [m for m in wire if isinstance(m.get("result"), dict) and "tools" in m["result"]]
        assert raw_lists, "no raw tools/list body captured"
        raw_tools = {t["name"]: t for t in raw_lists[-1]["result"]["tools"]}

        for tool in listing.tools:
            if tool.name not in RUN_TOOLS:
                continue
            assert tool.input_schema.get("type") == "object", f"{tool.name} inputSchema type"
            props = tool.input_schema.get("properties") or {}
            for arg in TOOL_ARGS[tool.name]:
                assert arg in props, f"{tool.name} inputSchema lacks property {arg}: {sorted(props)}"
            required = tool.input_schema.get("required") or []
            for arg in TOOL_REQUIRED_ARGS[tool.name]:
                assert arg in required, f"{tool.name} inputSchema does not require {arg}: {required}"
            assert tool.output_schema is not None, f"{tool.name} has no outputSchema"
            assert tool.output_schema.get("type") == "object", f"{tool.name} outputSchema type"

            want = TOOL_SCOPE[tool.name]
            # Compatibility copy in _meta (kept by the SDK model).
            meta = tool.meta or {}
            assert "securitySchemes" in meta, f"{tool.name}: _meta.securitySchemes missing: {meta}"
            assert want in security_scopes(meta["securitySchemes"]), (
                f"{tool.name}: _meta.securitySchemes lacks {want}: {meta['securitySchemes']}"
            )
            # Standard tool field: the SDK model drops unknown fields, so read it
            # from model_extra when the SDK keeps it, else from the raw body.
            extra = getattr(tool, "model_extra", None) or {}
            standard = extra.get("securitySchemes", raw_tools[tool.name].get("securitySchemes"))
            assert standard is not None, f"{tool.name}: tool field securitySchemes missing"
            assert want in security_scopes(standard), (
                f"{tool.name}: securitySchemes lacks {want}: {standard}"
            )

    # A second connection sees the same catalog order.
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, _):
        again = await session.list_tools()
        assert [t.name for t in again.tools] == names, "tools/list order differs across connections"


# (b) ---------------------------------------------------------------------------------------------


async def test_run_loop_to_completion(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, _):
        await session.list_tools()
        run = await call_ok(
            session, "helix_run_start", {"idempotency_key": key("start"), "request": start_request()}
        )
        assert_run(run)
        assert run["version"] == 1, f"start version: {run['version']}"
        run_id = run["run_id"]
        trail = [(run["version"], run["lifecycle_status"], run["completion_status"])]

        for _ in range(12):
            if is_terminal(run) or run["budget"]["steps_remaining"] <= 0:
                break
            nxt = await call_ok(
                session,
                "helix_run_continue",
                {"run_id": run_id, "idempotency_key": key("cont"), "request": continue_request(run)},
            )
            assert_run(nxt)
            assert nxt["run_id"] == run_id
            assert nxt["version"] > run["version"], f"version did not advance: {run['version']} -> {nxt['version']}"
            run = nxt
            trail.append((run["version"], run["lifecycle_status"], run["completion_status"]))

        assert run["completion_status"] == "completed", f"loop ended at {trail}; last run: {json.dumps(run, indent=1)}"
        assert run["lifecycle_status"] == "completed", trail
        assert run["terminal_authority_status"] == "authorized", run["terminal_authority_status"]
        assert run["recommended_next_action"] == "stop", run["recommended_next_action"]

        inspected = await call_ok(session, "helix_run_inspect", {"run_id": run_id})
        assert_run(inspected)
        assert inspected["run_id"] == run_id
        assert inspected["version"] == run["version"]
        assert inspected["completion_status"] == "completed"
        assert inspected["terminal_authority_status"] == "authorized"
        ev = inspected["evidence"]
        n_refs = sum(len(ev.get(k) or []) for k in ("observation_refs", "evidence_refs", "receipt_refs"))
        assert n_refs >= 1, f"completed run has no evidence refs: {ev}"

        bundle = await call_ok(session, "helix_run_fetch_evidence", {"run_id": run_id})
        assert bundle, "empty evidence bundle"
        assert_false_flags(bundle, "evidence bundle")

        events = await list_all_events(session, run_id)
        seqs = [e["seq"] for e in events]
        assert seqs == list(range(1, len(events) + 1)), f"event seqs not contiguous from 1: {seqs}"
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "run_started", kinds
        assert "run_completed" in kinds, kinds
        for e in events:
            assert e.get("schema") == "helix.agent_run.event.v1", e.get("schema")
            assert e.get("run_id") == run_id


# (c) ---------------------------------------------------------------------------------------------


async def test_replayed_start_returns_same_run(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, _):
        args = {"idempotency_key": key("replay"), "request": start_request()}
        first = await session.call_tool("helix_run_start", args)
        assert not first.is_error, first.structured_content
        second = await session.call_tool("helix_run_start", json.loads(json.dumps(args)))
        assert not second.is_error, second.structured_content
        a, b = structured(first), structured(second)
        assert a["version"] == 1 and b["version"] == 1, (a["version"], b["version"])
        assert b["run_id"] == a["run_id"], f"replay gave a new run: {a['run_id']} vs {b['run_id']}"
        assert not (first.meta or {}).get("helix/idempotency_replayed"), first.meta
        assert (second.meta or {}).get("helix/idempotency_replayed") is True, (
            f"replayed result _meta lacks helix/idempotency_replayed=true: {second.meta}"
        )

        # Same key, different request: idempotency_conflict (docs/wire.md).
        other = {"idempotency_key": args["idempotency_key"], "request": start_request(objective=UNCOVERED_OBJECTIVE)}
        err, _ = await call_err(session, "helix_run_start", other)
        assert err["code"] == "idempotency_conflict", err


# (d) ---------------------------------------------------------------------------------------------


async def test_stale_expected_version_conflicts(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, _):
        await session.list_tools()
        run = await call_ok(
            session,
            "helix_run_start",
            {"idempotency_key": key("start"), "request": start_request(contract=UNSATISFIABLE_CONTRACT)},
        )
        run_id = run["run_id"]
        moved = await call_ok(
            session,
            "helix_run_continue",
            {"run_id": run_id, "idempotency_key": key("cont"), "request": continue_request(run)},
        )
        assert moved["version"] >= 2, moved["version"]
        assert not is_terminal(moved), (
            "precondition: with completion_contract.min_evidence_refs=200 the run must still be "
            f"continuable after one continue; got {moved['lifecycle_status']}/{moved['completion_status']}"
        )
        stale = {"expected_version": 1, "instruction": "Try again.", "answers": []}
        err, _ = await call_err(
            session, "helix_run_continue", {"run_id": run_id, "idempotency_key": key("stale"), "request": stale}
        )
        assert err["code"] == "version_conflict", err
        assert (err.get("details") or {}).get("current_version") == moved["version"], err

        after = await call_ok(session, "helix_run_inspect", {"run_id": run_id})
        assert after["version"] == moved["version"], "a rejected continue changed the run"


# (e) ---------------------------------------------------------------------------------------------


async def test_insufficient_scope(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["read_only"]) as (session, _):
        listing = await session.list_tools()
        names = [t.name for t in listing.tools]
        for name in RUN_TOOLS:
            assert name in names, f"catalog filtered for a read-only token: {name} missing"

        err, result = await call_err(
            session, "helix_run_start", {"idempotency_key": key("scope"), "request": start_request()}
        )
        assert err["code"] == "insufficient_scope", err
        required = (err.get("details") or {}).get("required_scopes") or []
        assert "helix.agent_runs.write" in required, f"details.required_scopes: {err}"
        meta = result.meta or {}
        assert "mcp/www_authenticate" in meta, f"_meta lacks mcp/www_authenticate: {meta}"
        challenge = meta["mcp/www_authenticate"]
        text = " ".join(challenge) if isinstance(challenge, list) else str(challenge)
        assert "insufficient_scope" in text, text
        assert "helix.agent_runs.write" in text, text


# (f) ---------------------------------------------------------------------------------------------


async def test_cancel_then_continue_is_rejected(helix):
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, _):
        await session.list_tools()
        run = await call_ok(
            session, "helix_run_start", {"idempotency_key": key("start"), "request": start_request()}
        )
        run_id = run["run_id"]
        assert run["version"] == 1
        cancelled = await call_ok(
            session,
            "helix_run_cancel",
            {
                "run_id": run_id,
                "idempotency_key": key("cancel"),
                "request": {"expected_version": 1, "reason": "conformance test cancels the run"},
            },
        )
        assert_run(cancelled)
        assert cancelled["lifecycle_status"] == "cancelled", cancelled["lifecycle_status"]
        assert cancelled["completion_status"] == "cancelled", cancelled["completion_status"]
        assert cancelled["version"] == 2, cancelled["version"]
        assert cancelled.get("cancelled_at"), "cancelled_at not set"

        err, _ = await call_err(
            session,
            "helix_run_continue",
            {
                "run_id": run_id,
                "idempotency_key": key("cont"),
                "request": {"expected_version": 2, "instruction": "Keep going.", "answers": []},
            },
        )
        assert err["code"] == "run_not_continuable", err

        kinds = [e["kind"] for e in await list_all_events(session, run_id)]
        assert "run_cancelled" in kinds, kinds


# (g) ---------------------------------------------------------------------------------------------


async def test_argument_errors_name_the_path_and_rule(helix):
    """Arguments off the input schema come back as a tool result (SEP-1303): isError, and the
    invalid_request error naming the field and the rule; nothing the caller sent is repeated."""
    async with mcp_session(helix.mcp_url, helix.tokens["full"]) as (session, _):
        cases = [
            ("helix_run_inspect", {}, "run_id: missing", None),
            (
                "helix_run_start",
                {"idempotency_key": key("args"), "request": {**start_request(), "budget": {"max_steps": "eight_steps"}}},
                "request.budget.max_steps: must be an integer or null",
                "eight_steps",
            ),
            (
                "helix_run_start",
                {"idempotency_key": key("args"), "request": {**start_request(), "tenant_override": "t-9"}},
                "request: unknown field (allowed: budget, completion_contract, constraints, database_scope, objective)",
                "tenant_override",
            ),
            (
                "helix_run_continue",
                {"run_id": "run_" + "0" * 32, "idempotency_key": key("args"),
                 "request": {"expected_version": 1, "answers": [{"value": "seventeen"}]}},
                "request.answers[0].question_id: missing",
                "seventeen",
            ),
        ]
        for name, args, want, caller in cases:
            result = await session.call_tool(name, args)
            assert result.is_error, (name, result)
            error = result.structured_content["error"]
            assert error["code"] == "invalid_request", error
            field, rule = want.split(": ", 1)
            assert error["details"] == {"field": field, "rule": rule}, error
            assert error["message"] == f"invalid request: {want}", error
            if caller is not None:
                assert caller not in json.dumps(result.structured_content)
        # The session is still usable after an argument error.
        listing = await session.list_tools()
        assert any(t.name == "helix_run_inspect" for t in listing.tools)
