"""Schemathesis hooks of fuzz.py: a check of the contract's headers on every response,
a fresh Idempotency-Key for each generated request, and the one narrow filter of
refusals that no JSON Schema can state (each named below, with its reason; the same
reasons are in docs/decisions.md, "Schemathesis against the published contract")."""

import json
import uuid

import schemathesis

IDEMPOTENCY_KEY = "Idempotency-Key"


@schemathesis.check
def no_store_and_request_id(ctx, response, case):
    headers = {k.lower(): v for k, v in response.headers.items()}
    cache = headers.get("cache-control", [""])
    cache = cache[0] if isinstance(cache, list) else cache
    if cache != "no-store":
        raise AssertionError(f"Cache-Control is {cache!r}, not no-store")
    if not headers.get("x-request-id"):
        raise AssertionError("no X-Request-Id")


def _valid_key(value):
    return isinstance(value, str) and 8 <= len(value) <= 200 and all(0x21 <= ord(c) <= 0x7E for c in value)


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    """A client gives each new request its own key; the generator reuses one example key
    across different bodies, which the contract answers `idempotency_conflict` (422), as
    it must. A valid key is replaced by a fresh one; an invalid key (the negative case)
    is sent as generated."""
    if case.headers and _valid_key(case.headers.get(IDEMPOTENCY_KEY)):
        case.headers[IDEMPOTENCY_KEY] = f"st-{uuid.uuid4().hex}"


# Schema-valid requests the server refuses for a reason no schema can state:
# (error code, a fragment of its message or None for any).
UNSTATABLE = [
    # A well-shaped cursor whose check fails: cursors are opaque, signed for one caller
    # and one list; only the server can tell a forged one.
    ("invalid_request", "cursor: not a cursor of this list"),
    # Text the one credential rule (shared with the MCP preflight) reads as a secret.
    ("credential_rejected", None),
    # A continuation's answers must name the run's outstanding questions, each once: the
    # run's state, not the request's shape.
    ("invalid_request", "is not an outstanding question"),
    ("invalid_request", "is answered twice"),
    # A continuation with neither an instruction nor answers: stating "one of the two" needs an
    # `anyOf` that generated clients (openapi-python-client) cannot read, so the document
    # says it in the description and the server refuses it.
    ("invalid_request", "a continuation needs a nonempty instruction"),
    # Chat text the chat rule refuses: it normalises first (NFKC, invisible prefixes,
    # look-alike slashes), which no JSON Schema keyword can state.
    ("action_refused", "reason:chat_command"),
    ("action_refused", "reason:chat_text"),
    # A player action outside the room's region or naming a denied id: the room's policy
    # (its region, the deny list), not the action's shape. Every other `action_refused`
    # reason (an id's shape, a field's bounds) is stated by the schema and counts.
    ("action_refused", "reason:out_of_region"),
    ("action_refused", "reason:denied"),
]


def _integral_float(value):
    """True when a JSON value holds a number spelled with a fraction that is whole (`46.0`)."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_integral_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_integral_float(v) for v in value)
    return False


@schemathesis.hook
def filter_failure(ctx, failure, case, response):
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return True
    # A whole number spelled with a fraction (`46.0`) where an integer is read: JSON
    # Schema's `integer` admits it; the server reads integers as JSON integers only.
    if isinstance(case.body, (dict, list)) and _integral_float(case.body):
        return False
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return True
    reason = (error.get("details") or {}).get("reason")
    said = error.get("message", "") + (f" reason:{reason}" if reason else "")
    for code, fragment in UNSTATABLE:
        if error.get("code") == code and (fragment is None or fragment in said):
            return False
    return True
