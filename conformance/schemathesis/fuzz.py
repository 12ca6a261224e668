"""Schemathesis against a real `helix serve`: the bearer routes of /openapi.json with a
token holding every scope, 100 examples per operation (HELIX_SCHEMATHESIS_EXAMPLES).

    python fuzz.py SCHEMATHESIS_BIN [MAX_EXAMPLES]

Every phase (the documented examples, the coverage of each bound, fuzzing, and the
stateful phase that follows the document's links: a started run to its inspect,
continue, cancel, events and evidence; a created room to its routes) and every check
(`--checks all`: no 5xx, schema and status conformance, negative data rejected,
positive data accepted, a missing credential refused, use after free, resource
availability, ...), plus `Cache-Control: no-store` and `X-Request-Id` on every
response (hooks.py). Where a check is configured around, schemathesis.toml says why."""

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from helix_server import HelixServer  # noqa: E402

EVERY_SCOPE = " ".join(
    [
        "helix.agent_runs.read",
        "helix.agent_runs.write",
        "helix.rooms.read",
        "helix.rooms.manage",
        "helix.room_sources.manage",
        "helix.environment_actions.read",
        "helix.environment_actions.write",
        "helix.data.research_library.read",
    ]
)


def main() -> int:
    st = sys.argv[1]
    examples = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("HELIX_SCHEMATHESIS_EXAMPLES", "100")
    # The fuzzer sends far more than a client would in a minute: raise the per-address and
    # per-principal limits of the bearer lanes so it reaches the handlers, not the 429.
    for lane in ("AGENT", "MCP", "ROOM_AGENT"):
        os.environ.setdefault(f"HELIX_{lane}_IP_RATE_LIMIT", "1000000")
        os.environ.setdefault(f"HELIX_{lane}_PRINCIPAL_RATE_LIMIT", "1000000")
    server = HelixServer()
    token = {}
    server.start(prepare=lambda s: token.setdefault("t", s.mint(EVERY_SCOPE)))
    try:
        report = server.tmp / "schemathesis"
        cmd = [
            st, "--config-file", str(HERE / "schemathesis.toml"), "run", f"{server.base_url}/openapi.json",
            "--header", f"Authorization: Bearer {token['t']}",
            "--include-path-regex", "^/api/v1/",
            "--checks", "all",
            "--phases", "examples,coverage,fuzzing,stateful",
            "--max-examples", str(examples),
            "--workers", "1",
            "--seed", os.environ.get("HELIX_SCHEMATHESIS_SEED", "1"),
            "--report", "junit", "--report-dir", str(report),
        ]
        env = dict(os.environ, SCHEMATHESIS_HOOKS="hooks", PYTHONPATH=str(HERE))
        return subprocess.run(cmd, env=env, cwd=server.tmp).returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
