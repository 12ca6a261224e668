"""The official MCP Python SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`)
against `helix serve`'s development authorization server, with a person's part done in a
real headless Chromium (oauth_browser.py): discovery from the 401 challenge, dynamic
registration, authorization (sign-in, consent), the token exchange, `tools/list` and tool
calls with the access token, a refresh (rotated; the rotated token refused on reuse), a
denial, and a scope step-up.
"""

from __future__ import annotations

import os
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import jwt
import pytest
from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from helix_server import SUBJECT, TENANT
from oauth_browser import Authorization, Browser, Callback, browser_available
from test_mcp_conformance import RUN_TOOLS, assert_run, call_err, call_ok, key, start_request

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not browser_available() and os.environ.get("CI") != "true",
        reason="chromium/chromedriver missing (apt-get install -y chromium chromium-driver)",
    ),
]

CLIENT_NAME = "Helix conformance (Python SDK)"
ROOMS_MANAGE = "helix.rooms.manage"


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """The SDK's redirect and callback handlers: the browser walks the authorization URL
    (untick / deny as told for the next walk) and the loopback callback hands the SDK
    the code and state it received."""

    def __init__(self, browser: Browser, callback: Callback) -> None:
        self.browser, self.callback = browser, callback
        self.untick: tuple[str, ...] = ()
        self.approve = True
        self.walks: list[Authorization] = []
        self.urls: list[str] = []

    async def redirect(self, url: str) -> None:
        self.urls.append(url)
        walk = await anyio.to_thread.run_sync(
            lambda: self.browser.authorize(
                url, self.callback.uri, SUBJECT, TENANT, self.untick, self.approve, CLIENT_NAME
            )
        )
        self.walks.append(walk)

    async def result(self) -> AuthorizationCodeResult:
        query = await anyio.to_thread.run_sync(lambda: self.callback.wait(len(self.walks)))
        if "error" in query:
            raise OAuthFlowError(f"authorization refused: {query['error']} (state {query.get('state')})")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


class Wire:
    """Every request the SDK's HTTP client sent, with its answer's status."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []
        self.answers: list[tuple[str, str, int, str]] = []

    async def on_request(self, request: httpx2.Request) -> None:
        self.sent.append((request.method, str(request.url), request.content))

    async def on_response(self, response: httpx2.Response) -> None:
        req = response.request
        challenge = response.headers.get("www-authenticate", "")
        self.answers.append((req.method, str(req.url), response.status_code, challenge))

    def token_grants(self) -> list[dict[str, str]]:
        return [
            {k: v[0] for k, v in parse_qs(body.decode()).items()}
            for method, url, body in self.sent
            if method == "POST" and urlsplit(url).path.endswith("/token")
        ]

    def paths(self, method: str) -> list[str]:
        return [urlsplit(url).path for m, url, _ in self.sent if m == method]


@pytest.fixture
def person():
    browser, callback = Browser(), Callback()
    try:
        yield Person(browser, callback)
    finally:
        browser.close()
        callback.close()


def public_client_metadata(person: Person) -> OAuthClientMetadata:
    """A public client (no secret) redirecting to the person's loopback callback."""
    return OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[person.callback.uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


def provider_for(helix, person: Person, storage: MemoryStorage) -> OAuthClientProvider:
    return OAuthClientProvider(helix.mcp_url, public_client_metadata(person), storage, person.redirect, person.result)


@asynccontextmanager
async def oauth_session(helix, provider: OAuthClientProvider, wire: Wire) -> AsyncIterator[ClientSession]:
    hooks = {"request": [wire.on_request], "response": [wire.on_response]}
    async with httpx2.AsyncClient(auth=provider, event_hooks=hooks, timeout=60) as http:
        async with streamable_http_client(helix.mcp_url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def verified_claims(helix, token: str) -> dict[str, Any]:
    """The access token verified as the resource server must: by the issuer's published
    JWKS (asymmetric), for the canonical resource as audience."""
    header = jwt.get_unverified_header(token)
    assert header["alg"] in ("ES256", "RS256"), f"access token is not asymmetric: {header}"
    meta = httpx2.get(f"{helix.base_url}/.well-known/oauth-authorization-server").json()
    resource = httpx2.get(f"{helix.base_url}/.well-known/oauth-protected-resource/mcp").json()["resource"]
    signing_key = jwt.PyJWKClient(meta["jwks_uri"]).get_signing_key_from_jwt(token)
    return jwt.decode(
        token, signing_key.key, algorithms=[header["alg"]], audience=resource, issuer=meta["issuer"]
    )


def causes(exc: BaseException) -> list[BaseException]:
    """The exception, the ones inside it (task groups) and the ones behind it."""
    found, todo = [], [exc]
    while todo:
        e = todo.pop()
        if e is None or e in found:
            continue
        found.append(e)
        todo.extend(getattr(e, "exceptions", ()))
        todo.extend((e.__cause__, e.__context__))
    return found


def refresh_with(helix, refresh_token: str, client_id: str) -> httpx2.Response:
    meta = httpx2.get(f"{helix.base_url}/.well-known/oauth-authorization-server").json()
    resource = httpx2.get(f"{helix.base_url}/.well-known/oauth-protected-resource/mcp").json()["resource"]
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, "resource": resource}
    return httpx2.post(meta["token_endpoint"], data=form)


async def test_sdk_signs_in_through_the_browser_then_lists_calls_and_refreshes(helix, person):
    storage, wire = MemoryStorage(), Wire()
    provider = provider_for(helix, person, storage)
    async with oauth_session(helix, provider, wire) as session:
        # Discovery started from the resource's challenge, not from configuration.
        first = wire.answers[0]
        assert first[0] == "POST" and first[2] == 401, wire.answers[:3]
        assert "resource_metadata=" in first[3], first
        gets = wire.paths("GET")
        assert any(p.startswith("/.well-known/oauth-protected-resource") for p in gets), gets
        assert any(p.startswith("/.well-known/oauth-authorization-server") for p in gets), gets
        assert wire.paths("POST").count("/register") == 1, wire.paths("POST")

        # The person's part: signed in, saw this client and the scopes, approved.
        (walk,) = person.walks
        assert walk.pages == ["sign-in", "consent"], walk.pages
        assert walk.client_shown, "the consent page does not name the registering client"
        assert ROOMS_MANAGE in walk.consent_scopes, walk.consent_scopes
        (authorize_url,) = person.urls
        q = {k: v[0] for k, v in parse_qs(urlsplit(authorize_url).query).items()}
        assert q["code_challenge_method"] == "S256" and q["resource"] == helix.mcp_url, q

        (grant,) = wire.token_grants()
        assert grant["grant_type"] == "authorization_code" and grant["code"] == walk.query()["code"], grant
        tokens = storage.tokens
        assert tokens is not None and tokens.refresh_token, "no refresh token issued"
        claims = verified_claims(helix, tokens.access_token)
        assert claims["sub"] == SUBJECT and TENANT in claims.values(), claims
        assert claims["client_id"] == storage.client.client_id, (claims, storage.client)
        for claim in ("exp", "iat", "jti", "scope"):
            assert claim in claims, f"access token lacks {claim}: {claims}"

        names = [t.name for t in (await session.list_tools()).tools]
        for tool in RUN_TOOLS:
            assert tool in names, f"{tool} missing from tools/list: {names}"
        run = await call_ok(session, "helix_run_start", {"idempotency_key": key("oauth"), "request": start_request()})
        assert_run(run)
        assert run["version"] == 1, run

        # The access token "expires" on the client's clock: the SDK refreshes before the
        # next request and the server rotates the refresh token.
        first_tokens = tokens
        provider.context.token_expiry_time = time.time() - 1
        inspected = await call_ok(session, "helix_run_inspect", {"run_id": run["run_id"]})
        assert inspected["run_id"] == run["run_id"], inspected

    grants = wire.token_grants()
    assert [g["grant_type"] for g in grants] == ["authorization_code", "refresh_token"], grants
    assert grants[1]["refresh_token"] == first_tokens.refresh_token and grants[1]["resource"] == helix.mcp_url
    rotated = storage.tokens
    assert rotated.access_token != first_tokens.access_token, "refresh returned the same access token"
    assert rotated.refresh_token and rotated.refresh_token != first_tokens.refresh_token, "refresh token not rotated"
    assert verified_claims(helix, rotated.access_token)["sub"] == SUBJECT

    # Reusing the rotated-away refresh token is refused and revokes its family.
    reused = refresh_with(helix, first_tokens.refresh_token, storage.client.client_id)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant", reused.text
    after = refresh_with(helix, rotated.refresh_token, storage.client.client_id)
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant", after.text


async def test_a_denied_consent_reaches_the_sdk_as_access_denied(helix, person):
    storage, wire = MemoryStorage(), Wire()
    person.approve = False
    with pytest.raises(Exception) as raised:
        async with oauth_session(helix, provider_for(helix, person, storage), wire):
            pass
    refusals = [e for e in causes(raised.value) if isinstance(e, OAuthFlowError)]
    assert any("access_denied" in str(e) for e in refusals), f"not refused by the denial: {raised.value!r}"
    query = person.callback.wait(1)
    assert query.get("error") == "access_denied" and "code" not in query, query
    assert query.get("state") and query["state"] in person.urls[0], "the denial does not echo state"
    assert wire.token_grants() == [] and storage.tokens is None


async def test_a_refused_scope_is_granted_by_a_new_authorization(helix, person):
    storage, wire = MemoryStorage(), Wire()
    provider = provider_for(helix, person, storage)
    create = {"idempotency_key": key("room"), "request": {"name": "Step-up room"}}

    person.untick = (ROOMS_MANAGE,)
    async with oauth_session(helix, provider, wire) as session:
        granted = storage.tokens.scope.split()
        assert ROOMS_MANAGE not in granted and ROOMS_MANAGE not in verified_claims(
            helix, storage.tokens.access_token
        )["scope"].split(), granted
        err, result = await call_err(session, "helix_room_create", create)
        assert err["code"] == "insufficient_scope" and ROOMS_MANAGE in err["details"]["required_scopes"], err
        challenge = (result.meta or {}).get("mcp/www_authenticate")
        challenge = " ".join(challenge) if isinstance(challenge, list) else str(challenge)
        assert "insufficient_scope" in challenge and ROOMS_MANAGE in challenge, result.meta

    # The host's answer to the challenge: drop the token and authorize again (the same
    # registration), this time approving the scope.
    person.untick = ()
    provider.context.clear_tokens()
    storage.tokens = None
    async with oauth_session(helix, provider, wire) as session:
        assert ROOMS_MANAGE in storage.tokens.scope.split(), storage.tokens.scope
        room = await call_ok(session, "helix_room_create", create)
        assert room["schema"] == "helix.room.v1" and room["role"] == "owner", room

    assert wire.paths("POST").count("/register") == 1, "the second authorization registered again"
    assert len(person.walks) == 2 and person.walks[1].pages[-1] == "consent", [w.pages for w in person.walks]
