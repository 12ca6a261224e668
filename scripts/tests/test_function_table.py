"""docs/deploy.md's function table against the code: one row per `AWS::Serverless::Function`
of infra/template.yaml, naming the binary the template builds and the crate that defines
it (a `[[bin]]` or package of that name under functions/), and no other row."""

import re
import tomllib
import unittest
from pathlib import Path

from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `(?P<resource>\w+)`[^|]*\| `(?P<crate>functions/[\w-]+)` \| `(?P<binary>[\w-]+)` \|")


def documented():
    rows = {}
    for line in (ROOT / "docs" / "deploy.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            rows[m["resource"]] = (m["crate"], m["binary"])
    return rows


def binaries(crate: Path):
    manifest = tomllib.loads((crate / "Cargo.toml").read_text())
    names = {b["name"] for b in manifest.get("bin", [])}
    return names or {manifest["package"]["name"]}


class FunctionTableTest(unittest.TestCase):
    def test_the_function_table_lists_every_function_of_the_template_with_its_binary_and_crate(self):
        template, matches = decode(str(ROOT / "infra" / "template.yaml"))
        assert not matches, matches
        built = {
            name: r["Metadata"]["BuildProperties"]["Binary"]
            for name, r in template["Resources"].items()
            if r["Type"] == "AWS::Serverless::Function"
        }
        rows = documented()
        self.assertEqual(set(rows), set(built), "one row per function of the template, and no other")
        for resource, (crate, binary) in rows.items():
            self.assertEqual(binary, built[resource], f"{resource}: the binary the template builds")
            self.assertIn(binary, binaries(ROOT / crate), f"{resource}: {crate} defines {binary}")


if __name__ == "__main__":
    unittest.main()
