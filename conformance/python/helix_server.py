"""Start and stop a real `helix serve` for the conformance tests.

Each `HelixServer` gets a fresh data dir in a temp dir and a free loopback
port. Tokens are minted with `helix dev-token` against the same data dir
*before* the server starts, so the CLI never races the running server for
the embedded store.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[2]

FULL_SCOPE = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read"
READ_ONLY_SCOPE = "helix.agent_runs.read helix.data.research_library.read"
ROOM_SCOPE = FULL_SCOPE + " helix.rooms.read helix.rooms.manage"

SUBJECT = "conformance-python"
TENANT = "tenant-conformance"

READY_TIMEOUT_S = float(os.environ.get("HELIX_READY_TIMEOUT", "60"))


def helix_bin() -> Path:
    """`$HELIX_BIN` (absolute, or relative to the repo root), else target/debug/helix."""
    raw = os.environ.get("HELIX_BIN", "target/debug/helix")
    path = Path(raw)
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class HelixServer:
    tokens: dict[str, str] = field(default_factory=dict)
    port: int = 0
    tmp: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    # Extra environment of `helix serve` (operator settings a test needs).
    env: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def data_dir(self) -> Path:
        assert self.tmp is not None
        return self.tmp / "data"

    def mint(self, scope: str, subject: str = SUBJECT, tenant: str = TENANT) -> str:
        out = subprocess.run(
            [
                str(helix_bin()),
                "dev-token",
                "--data-dir",
                str(self.data_dir),
                "--subject",
                subject,
                "--tenant",
                tenant,
                "--scope",
                scope,
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"helix dev-token exited {out.returncode}: {out.stderr.decode(errors='replace')}"
            )
        token = out.stdout.decode().strip()
        # A JWT is three base64url parts; dev-token must print only the token.
        assert token.count(".") == 2 and " " not in token and "\n" not in token, (
            f"dev-token stdout is not a bare JWT: {token!r}"
        )
        return token

    def start(self, prepare: "Callable[[HelixServer], None] | None" = None) -> "HelixServer":
        """`prepare` runs after the default tokens are minted and before `serve` starts
        (operator CLI steps such as `helix account policy` need the store to themselves)."""
        binary = helix_bin()
        if not binary.exists():
            raise RuntimeError(f"helix binary not found at {binary} (set HELIX_BIN)")
        self.tmp = Path(tempfile.mkdtemp(prefix="helix-conf-py-"))
        self.data_dir.mkdir()
        self.tokens["full"] = self.mint(FULL_SCOPE)
        self.tokens["read_only"] = self.mint(READ_ONLY_SCOPE)
        # Minted before serve starts: the embedded store admits one process at a time.
        self.tokens["rooms"] = self.mint(ROOM_SCOPE)
        if prepare is not None:
            prepare(self)
        self.port = free_port()
        self.log_path = self.tmp / "serve.log"
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                str(binary),
                "serve",
                "--addr",
                f"127.0.0.1:{self.port}",
                "--data-dir",
                str(self.data_dir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
        )
        log.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        url = f"{self.base_url}/.well-known/oauth-protected-resource"
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = "no attempt"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"helix serve exited early with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
            except OSError as e:
                last = repr(e)
            time.sleep(0.1)
        raise RuntimeError(
            f"helix serve not ready after {READY_TIMEOUT_S}s ({last}):\n{self.log_tail()}"
        )

    def log_tail(self, n: int = 60) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        if self.tmp is not None and os.environ.get("HELIX_KEEP_DATA") != "1":
            shutil.rmtree(self.tmp, ignore_errors=True)
