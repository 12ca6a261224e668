"""The official MCP Python SDK's OAuth client in Client ID Metadata Document mode
(`OAuthClientProvider(..., client_metadata_url=...)`) against `helix serve`'s development
authorization server: the client's document is served over HTTPS from a loopback server
in the test (a test CA made here, trusted by `helix serve` through `SSL_CERT_FILE`), the
SDK skips registration because the issuer advertises `client_id_metadata_document_supported`,
the person signs in and consents in headless Chromium, and the SDK lists and calls tools.
"""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import json
import os
import ssl
import tempfile
import threading
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from helix_server import HelixServer
from oauth_browser import browser_available
from test_oauth_sdk import CLIENT_NAME, MemoryStorage, Wire, oauth_session, person, public_client_metadata, verified_claims  # noqa: F401
from mcp.client.auth import OAuthClientProvider

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not browser_available() and os.environ.get("CI") != "true",
        reason="chromium/chromedriver missing (apt-get install -y chromium chromium-driver)",
    ),
]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate for 127.0.0.1 it signed: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("helix test CA"))
        .issuer_name(_name("helix test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class DocumentServer:
    """The client's metadata document over HTTPS on loopback; counts its fetches."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.document: dict = {}
        self.fetches = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.fetches += 1
                if self.path != "/oauth/client.json":
                    self.send_error(404)
                    return
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "max-age=300")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}/oauth/client.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def tls():
    with tempfile.TemporaryDirectory(prefix="helix-cimd-") as folder:
        yield make_tls(Path(folder))


@pytest.fixture
def documents(tls):
    server = DocumentServer(tls[1], tls[2])
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def helix_trusting_the_test_ca(tls):
    # `helix serve` verifies the document's TLS against the system roots; SSL_CERT_FILE
    # replaces them with the test CA for this process only.
    server = HelixServer(env={"SSL_CERT_FILE": str(tls[0])})
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_sdk_in_cimd_mode_signs_in_without_registering_then_calls_tools(
    helix_trusting_the_test_ca, documents, person
):
    helix = helix_trusting_the_test_ca
    meta = json.loads(urllib.request.urlopen(f"{helix.base_url}/.well-known/oauth-authorization-server").read())
    assert meta["client_id_metadata_document_supported"] is True, meta
    documents.document = {
        "client_id": documents.url,
        "client_name": CLIENT_NAME,
        "redirect_uris": [person.callback.uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    metadata = public_client_metadata(person)
    storage, wire = MemoryStorage(), Wire()
    provider = OAuthClientProvider(
        helix.mcp_url, metadata, storage, person.redirect, person.result, client_metadata_url=documents.url
    )
    async with oauth_session(helix, provider, wire) as session:
        assert "/register" not in wire.paths("POST"), wire.paths("POST")
        (walk,) = person.walks
        assert walk.pages == ["sign-in", "consent"], walk.pages
        # The name the person reads is the document's (the page adds the document's URL).
        assert walk.client_shown, "the consent page does not name the client of the document"
        tools = await session.list_tools()
        assert tools.tools, "no tools listed"
    assert storage.client is not None and storage.client.client_id == documents.url
    assert storage.tokens is not None
    claims = verified_claims(helix, storage.tokens.access_token)
    assert claims["client_id"] == documents.url, claims
    assert documents.fetches == 1, f"cached by max-age: {documents.fetches} fetches"
