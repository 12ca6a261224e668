"""What `sam validate` checks, offline: the SAM transform of infra/template.yaml succeeds
(the serverless resources expand: function URLs, their permissions, roles, the HTTP API),
and cfn-lint finds no error in the expanded CloudFormation. cfn-lint alone does not
validate SAM-only properties (a bad FunctionUrlConfig passes it); the translator does."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from cfnlint.decode import decode
from samtranslator.public.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform

ROOT = Path(__file__).resolve().parents[2]
PSEUDO = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}


class NoManagedPolicies:
    """The template names no AWS managed policy; the translator must not look any up."""

    def load(self):
        return {}


def translate(template):
    # As `sam validate` does before packaging: a local CodeUri becomes an S3 placeholder.
    template = copy.deepcopy(template)
    for resource in template["Resources"].values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://bucket/key"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(template, PSEUDO, NoManagedPolicies())


class SamTranslateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.template, matches = decode(str(ROOT / "infra" / "template.yaml"))
        assert not matches, matches
        cls.out = translate(cls.template)

    def test_the_function_urls_and_their_public_permissions_expand(self):
        resources = self.out["Resources"]
        urls = {r["Properties"]["TargetFunctionArn"]["Ref"] for r in resources.values() if r["Type"] == "AWS::Lambda::Url"}
        self.assertEqual(urls, {"AgentRunsFunction", "McpFunction", "SolverFunction"})
        # The two that run turns only with FunctionUrls=enabled.
        conditions = {name: resources[f"{name}Url"].get("Condition") for name in urls}
        self.assertEqual(conditions, {"AgentRunsFunction": "HasFunctionUrls", "McpFunction": "HasFunctionUrls", "SolverFunction": "DeploySolver"})
        for name in urls:
            self.assertEqual(resources[f"{name}Url"]["Properties"]["AuthType"], "NONE")
        permissions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"]
        self.assertTrue(any(p["Properties"].get("FunctionUrlAuthType") == "NONE" for p in permissions))

    def test_the_self_invoke_policies_attach_to_the_generated_roles(self):
        resources = self.out["Resources"]
        for fn in ("AgentRunsFunction", "McpFunction"):
            self.assertEqual(resources[f"{fn}Role"]["Type"], "AWS::IAM::Role", fn)
            policy = resources[f"{fn[: -len('Function')]}SelfInvoke"]["Properties"]
            self.assertEqual(policy["Roles"], [{"Ref": f"{fn}Role"}])

    def test_a_bad_sam_property_is_refused(self):
        # The check can fail: the translator refuses what cfn-lint lets through.
        broken = copy.deepcopy(self.template)
        broken["Resources"]["AgentRunsFunction"]["Properties"]["FunctionUrlConfig"] = {"AuthType": "BOGUS"}
        with self.assertRaises(InvalidDocumentException):
            translate(broken)

    def test_cfn_lint_finds_no_error_in_the_expanded_template(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "expanded.json"
            path.write_text(json.dumps(self.out, default=str))
            # W1030: empty parameter defaults (secret ARNs given at deploy) are not ARNs.
            run = subprocess.run(
                [str(Path(sys.executable).with_name("cfn-lint")), "--ignore-checks", "W1030", "--", str(path)],
                capture_output=True,
                text=True,
            )
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)


if __name__ == "__main__":
    unittest.main()
