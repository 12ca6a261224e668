"""Drive the real Codex CLI (npm `@openai/codex`, pinned in conformance/codex) with a
throwaway HOME/CODEX_HOME: its `mcp login` as a subprocess, and its `app-server` over
stdio JSON-RPC (no model is involved in either)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0


def codex_bin() -> Path:
    raw = os.environ.get("CODEX_BIN")
    return Path(raw) if raw else REPO_ROOT / "conformance" / "codex" / "node_modules" / ".bin" / "codex"


def codex_env(home: Path) -> dict[str, str]:
    """Only what Codex needs: a fresh home, no provider keys, no proxy from the caller."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".codex").mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NO_COLOR": "1",
    }


class Lines:
    """A child's output, line by line, readable with a timeout."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []

        def pump() -> None:
            for raw in iter(stream.readline, b""):
                self.q.put(raw.decode(errors="replace").rstrip("\n"))
            self.q.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next(self, deadline: float) -> str | None:
        """The next line; None at end of output; TimeoutError past the deadline."""
        try:
            line = self.q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"no output line in time; so far: {self.seen[-10:]}") from None
        if line is not None:
            self.seen.append(line)
        return line


class AppServer:
    """`codex app-server` over stdio: newline-delimited JSON-RPC."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [str(codex_bin()), "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.out = Lines(self.proc.stdout)
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    def request(self, method: str, params: dict[str, Any], timeout: float = WAIT_S) -> dict[str, Any]:
        """The result of `method`; AssertionError carrying the error if it failed."""
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            line = self.out.next(deadline)
            if line is None:
                raise AssertionError(f"app-server exited during {method}: {self.out.seen[-10:]}")
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("id") == rid and "method" not in msg:
                assert "error" not in msg, f"{method} failed: {msg['error']}"
                return msg["result"]
            if "method" in msg and "id" in msg:
                raise AssertionError(f"app-server asked the client something during {method}: {msg}")
            self.notifications.append(msg)

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def close(self) -> None:
        stop(self.proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ends a child process: SIGTERM, then SIGKILL if it has not exited within 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
