"""scripts/tours against a stand-in `helix` (a real HTTP server for `serve`): a tour that
says what it prints passes, one that drifts (a missing expected line, a failing command)
fails, and the skip markers are honoured. The real tours run in scripts/test."""

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOURS = ROOT / "scripts" / "tours"

# `helix serve --addr H:P --data-dir D`: an HTTP server answering 200, which records the
# TOUR_SETTING it was started with in D/setting; `helix greet`: prints hello.
FAKE_HELIX = """#!/usr/bin/env python3
import http.server, os, sys
if sys.argv[1] == "serve":
    host, port = sys.argv[3].rsplit(":", 1)
    data = sys.argv[5]
    os.makedirs(data, exist_ok=True)
    open(os.path.join(data, "setting"), "w").write(os.environ.get("TOUR_SETTING", "unset"))
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
        def log_message(self, *a):
            pass
    http.server.HTTPServer((host, int(port)), H).serve_forever()
elif sys.argv[1] == "greet":
    print("hello from helix")
"""


class ToursTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        helix = self.dir / "bin" / "helix"
        helix.parent.mkdir()
        helix.write_text(FAKE_HELIX)
        helix.chmod(helix.stat().st_mode | stat.S_IXUSR)
        self.helix = helix

    def tearDown(self):
        self.tmp.cleanup()

    def run_tour(self, text):
        tour = self.dir / "tour.md"
        tour.write_text(text)
        env = dict(os.environ, HELIX_BIN=str(self.helix), HELIX_TOUR_TIMEOUT="30")
        return subprocess.run([sys.executable, str(TOURS), str(tour)], env=env, capture_output=True, text=True, timeout=60)

    def test_a_tour_whose_output_says_what_it_states_passes(self):
        out = self.run_tour(
            "# T\n\n```sh\nX=$(helix greet)\n```\n\nText.\n\n```bash\necho \"$X\"   # carried over\n#> hello from helix\n"
            "curl -s \"$HELIX_BASE_URL/\"\n#> {}\n```\n"
        )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("PASS tour.md", out.stdout)

    def test_a_missing_expected_line_fails_the_tour(self):
        out = self.run_tour("```sh\nhelix greet\n#> goodbye\n```\n")
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("FAIL tour.md", out.stdout)
        self.assertIn("expected 'goodbye'", out.stdout)

    def test_a_failing_command_fails_its_block(self):
        out = self.run_tour("```sh\necho one\n```\n\n```sh\nfalse\necho never\n#> never\n```\n")
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("block 2 failed", out.stdout)

    def test_skip_markers_are_honoured_and_the_reason_shown(self):
        out = self.run_tour("<!-- tour: skip needs an AWS account -->\n```sh\nfalse\n```\n")
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("SKIP tour.md: needs an AWS account", out.stdout)
        out = self.run_tour("```sh tour-skip\nfalse\n```\n\n```sh\nhelix greet\n#> hello\n```\n")
        self.assertEqual(out.returncode, 0, out.stdout)

    def test_the_server_gets_the_tours_setting_and_its_data_dir_is_dot_helix(self):
        out = self.run_tour("<!-- tour: serve-env TOUR_SETTING=on -->\n```sh\ncat .helix/setting\n#> on\n```\n")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
