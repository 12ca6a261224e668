"""A developer generates a client from /openapi.json and uses it: against a real
`helix serve`, fetch the served document, generate a Python client with
openapi-python-client (PyPI), import it, and drive a run through it.

    python client.py OPENAPI_PYTHON_CLIENT_BIN

Checks: generation succeeds with no warnings about the document; the generated typed
calls list runs, start a run (Idempotency-Key header), inspect it and list its events;
a replay of the start answers the same run; an unknown run answers the typed error
envelope (404); the run start's body is the generated StartRequest model."""

import importlib
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from helix_server import HelixServer  # noqa: E402

SCOPES = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read"


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def main() -> int:
    generator = sys.argv[1]
    server = HelixServer()
    token = {}
    server.start(prepare=lambda s: token.setdefault("t", s.mint(SCOPES)))
    try:
        work = server.tmp / "openapi-client"
        work.mkdir()
        doc = work / "openapi.json"
        with urllib.request.urlopen(f"{server.base_url}/openapi.json", timeout=10) as r:
            doc.write_bytes(r.read())
        # With `--meta none` the output path is the package itself.
        name = "helix_agent_api_client"
        gen = subprocess.run(
            [generator, "generate", "--path", str(doc), "--output-path", str(work / name), "--meta", "none"],
            capture_output=True, text=True, timeout=300, check=False,
            # Its formatter (ruff) is installed beside it.
            env=dict(os.environ, PATH=f"{Path(generator).parent}{os.pathsep}{os.environ.get('PATH', '')}"),
        )
        print(gen.stdout, gen.stderr)
        check(gen.returncode == 0, "openapi-python-client generated a client from /openapi.json")
        check("Warning" not in gen.stdout + gen.stderr, "the generator had no warning about the document")
        sys.path.insert(0, str(work))
        client_mod = importlib.import_module(name)
        api = lambda op: importlib.import_module(f"{name}.api.default.{op}")  # noqa: E731
        models = importlib.import_module(f"{name}.models")

        client = client_mod.AuthenticatedClient(base_url=server.base_url, token=token["t"], raise_on_unexpected_status=True)
        listed = api("list_agent_runs").sync_detailed(client=client)
        check(listed.status_code == 200 and listed.parsed is not None, "listAgentRuns answers a typed page")

        body = models.StartRequest.from_dict({"objective": "Which torch recipes does the corpus document?"})
        key = f"gen-client-{uuid.uuid4().hex[:12]}"
        started = api("start_agent_run").sync_detailed(client=client, body=body, idempotency_key=key)
        check(started.status_code == 201, f"startAgentRun: 201 (got {started.status_code})")
        run = started.parsed
        run_id = run.run_id
        check(run_id.startswith("run_"), f"the typed RunView carries run_id {run_id}")
        again = api("start_agent_run").sync_detailed(client=client, body=body, idempotency_key=key)
        replayed = again.headers.get("idempotency-replayed")
        check(
            again.status_code == 201 and replayed == "true" and again.parsed.run_id == run_id,
            f"a replay with the same key: the same run (status {again.status_code}, replayed {replayed})",
        )

        inspected = api("inspect_agent_run").sync_detailed(run_id, client=client)
        check(inspected.status_code == 200 and inspected.parsed.run_id == run_id, "inspectAgentRun: the same run")
        events = api("list_agent_run_events").sync_detailed(run_id, client=client)
        check(events.status_code == 200 and events.parsed is not None, "listAgentRunEvents answers a typed page")

        missing = api("inspect_agent_run").sync_detailed("run_00000000000000000000000000", client=client)
        err = json.loads(missing.content)
        check(missing.status_code == 404 and err["error"]["code"] == "not_found", "an unknown run: the typed 404")
        parsed_err = models.ErrorEnvelope.from_dict(err)
        check(parsed_err.error.code == "not_found", "the error parses as the generated ErrorEnvelope")
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
