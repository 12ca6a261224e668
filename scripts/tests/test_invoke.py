"""scripts/invoke against a fake `cargo` on PATH: which payload it sends, and the run id
it remembers from a start and fills into later events. No Lambda, no network."""

import json
import os
import stat
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INVOKE = ROOT / "scripts" / "invoke"

# `cargo lambda --version` succeeds; `cargo lambda invoke ... --data-file F ... NAME` copies
# F to $FAKE_CAPTURE and prints $FAKE_RESPONSE as the function's answer.
FAKE_CARGO = """#!/usr/bin/env bash
set -euo pipefail
[ "$1" = lambda ] || exit 1
[ "$2" = --version ] && { echo "cargo-lambda fake"; exit 0; }
while [ "$#" -gt 0 ]; do
  if [ "$1" = --data-file ]; then cp "$2" "$FAKE_CAPTURE"; fi
  shift
done
printf '%s' "$FAKE_RESPONSE"
"""


def lambda_result(status, body):
    return json.dumps({"statusCode": status, "headers": {}, "body": json.dumps(body), "isBase64Encoded": False})


class InvokeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        bin_dir = self.dir / "bin"
        bin_dir.mkdir()
        cargo = bin_dir / "cargo"
        cargo.write_text(FAKE_CARGO)
        cargo.chmod(cargo.stat().st_mode | stat.S_IXUSR)
        self.capture = self.dir / "sent.json"
        self.state = self.dir / "state" / "last-run"
        self.env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(self.dir),
            "TMPDIR": str(self.dir),
            "HELIX_TOKEN": "test-token-not-a-secret",
            "HELIX_INVOKE_STATE": str(self.state),
            "FAKE_CAPTURE": str(self.capture),
        }

    def tearDown(self):
        self.tmp.cleanup()

    def invoke(self, event, function, response, **env):
        run_env = {**self.env, "FAKE_RESPONSE": response, **env}
        return subprocess.run(
            [str(INVOKE), event, function], env=run_env, capture_output=True, text=True, timeout=60
        )

    def sent(self):
        return json.loads(self.capture.read_text())

    def test_a_start_answer_fills_the_run_id_of_the_next_events(self):
        out = self.invoke("start", "helix-agent-runs", lambda_result(201, {"run_id": "run_0123456789abcdef"}))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("run_0123456789abcdef", out.stdout, "the answer is still printed")
        self.assertEqual(self.state.read_text().strip(), "run_0123456789abcdef")
        self.assertNotIn("test-token", self.state.read_text())

        for event in ["inspect", "continue", "events", "evidence", "cancel"]:
            out = self.invoke(event, "helix-agent-runs", lambda_result(200, {"ok": True}))
            self.assertEqual(out.returncode, 0, out.stderr)
            sent = self.sent()
            text = json.dumps(sent)
            self.assertNotIn("RUN_ID_EXAMPLE", text, event)
            self.assertEqual(sent["pathParameters"]["run_id"], "run_0123456789abcdef", event)
            self.assertIn("/run_0123456789abcdef", sent["rawPath"], event)
            self.assertEqual(sent["headers"]["authorization"], "Bearer test-token-not-a-secret")

    def test_helix_run_id_wins_and_the_body_length_follows_the_substitution(self):
        out = self.invoke(
            "rooms-bind-run", "helix-rooms", lambda_result(200, {}), HELIX_RUN_ID="run_fromtheenvironment"
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        sent = self.sent()
        self.assertIn('"run_id":"run_fromtheenvironment"', sent["body"])
        if "content-length" in sent["headers"]:
            self.assertEqual(int(sent["headers"]["content-length"]), len(sent["body"].encode()))

    def test_without_a_run_id_the_event_is_refused_before_anything_is_sent(self):
        out = self.invoke("inspect", "helix-agent-runs", lambda_result(200, {}))
        self.assertEqual(out.returncode, 1)
        self.assertIn("invoke start first", out.stderr)
        self.assertFalse(self.capture.exists())

    def test_a_failed_or_malformed_answer_is_not_remembered(self):
        self.invoke("start", "helix-agent-runs", lambda_result(409, {"run_id": "run_0123456789abcdef"}))
        self.invoke("start", "helix-agent-runs", lambda_result(201, {"run_id": "run_../../etc"}))
        self.invoke("start", "helix-agent-runs", "not json")
        self.assertFalse(self.state.exists())

    def test_a_state_file_inside_a_crate_folder_is_refused(self):
        out = self.invoke(
            "start", "helix-agent-runs", lambda_result(201, {}), HELIX_INVOKE_STATE=str(ROOT / "core" / "state")
        )
        self.assertEqual(out.returncode, 2)
        self.assertIn("crate folder", out.stderr)


if __name__ == "__main__":
    unittest.main()
