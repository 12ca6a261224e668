"""infra/template.yaml as data (cfn-lint's loader, which reads !Ref and friends): the
long-turn front and the time limits that must agree. cfn-lint checks the syntax; these
check what it cannot: that the numbers match each other and the contract."""

import unittest
from pathlib import Path

from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parents[2]
TURN_FUNCTIONS = ["AgentRunsFunction", "McpFunction"]
HTTP_API_LIMIT_MS = 30_000


class TemplateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        template, matches = decode(str(ROOT / "infra" / "template.yaml"))
        assert not matches, matches
        cls.t = template
        cls.params = template["Parameters"]
        cls.globals = template["Globals"]["Function"]
        cls.functions = {
            name: r["Properties"] for name, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"
        }

    def env(self, props):
        return {**self.globals["Environment"]["Variables"], **props.get("Environment", {}).get("Variables", {})}

    def test_the_turn_timeout_defaults_to_the_contracts_120_s_and_is_clamped_to_900_s(self):
        p = self.params["TurnTimeoutMs"]
        self.assertEqual(int(p["Default"]), 120_000)
        self.assertEqual(int(p["MaxValue"]), 900_000)
        self.assertEqual(self.globals["Environment"]["Variables"]["HELIX_AGENT_TURN_TIMEOUT_MS"], {"Ref": "TurnTimeoutMs"})

    def test_the_functions_that_run_turns_have_an_optional_function_url_with_matching_limits(self):
        self.assertEqual(self.params["FunctionUrls"]["Default"], "disabled")
        self.assertEqual(self.t["Conditions"]["HasFunctionUrls"], {"Fn::Equals": [{"Ref": "FunctionUrls"}, "enabled"]})
        for name in TURN_FUNCTIONS:
            props = self.functions[name]
            self.assertNotIn("FunctionUrlConfig", props, f"{name}: its URL is a resource of its own, made only on demand")
            url = self.t["Resources"][f"{name}Url"]
            self.assertEqual((url["Type"], url["Condition"]), ("AWS::Lambda::Url", "HasFunctionUrls"), name)
            self.assertEqual(url["Properties"], {"TargetFunctionArn": {"Ref": name}, "AuthType": "NONE"}, name)
            public = self.t["Resources"][f"{name}UrlPublicPermissions"]
            self.assertEqual(public["Condition"], "HasFunctionUrls", name)
            self.assertEqual(public["Properties"]["Action"], "lambda:InvokeFunctionUrl", name)
            self.assertEqual(public["Properties"]["FunctionUrlAuthType"], "NONE", name)
            self.assertEqual(self.t["Resources"][f"{name}UrlInvoke"]["Condition"], "HasFunctionUrls", name)
            for output in (f"{name}Url", f"{name}UrlHost"):
                self.assertEqual(self.t["Outputs"][output]["Condition"], "HasFunctionUrls", output)
            # One parameter: the Lambda Timeout (s) and HELIX_GATEWAY_TIMEOUT_MS (ms) agree.
            self.assertEqual(props["Timeout"], {"Ref": "TurnFunctionTimeout"}, name)
            self.assertEqual(self.env(props)["HELIX_GATEWAY_TIMEOUT_MS"], {"Fn::Sub": "${TurnFunctionTimeout}000"}, name)
            hosts = self.env(props)["HELIX_AGENT_ALLOWED_HOSTS"]
            if name == "McpFunction":  # its own origin first (see the test below), then the same
                hosts = hosts["Fn::If"][2]
            self.assertEqual(hosts["Fn::If"][0], "HasFunctionUrlHosts", name)
            self.assertIn("${FunctionUrlHosts}", hosts["Fn::If"][1]["Fn::Sub"], name)
            self.assertEqual(self.env(props)["TRUST_PROXY"], "apigateway", name)
            permission = self.t["Resources"][f"{name}UrlInvoke"]["Properties"]
            self.assertEqual(permission["FunctionName"], {"Ref": name})
            self.assertEqual(permission["Action"], "lambda:InvokeFunction")
            self.assertIs(permission["InvokedViaFunctionUrl"], True)

    def test_a_default_turn_fits_in_the_function_and_the_function_in_the_lambda_maximum(self):
        p = self.params["TurnFunctionTimeout"]
        self.assertGreater(int(p["Default"]) * 1000, int(self.params["TurnTimeoutMs"]["Default"]))
        self.assertLessEqual(int(p["MaxValue"]), 900)
        self.assertGreaterEqual(int(p["MinValue"]) * 1000, HTTP_API_LIMIT_MS)

    def test_every_other_function_stays_under_the_gateway(self):
        self.assertEqual(self.globals["Environment"]["Variables"]["HELIX_GATEWAY_TIMEOUT_MS"], str(HTTP_API_LIMIT_MS))
        self.assertLess(int(self.globals["Timeout"]) * 1000, HTTP_API_LIMIT_MS)
        for name, props in self.functions.items():
            if name in TURN_FUNCTIONS or name == "SolverFunction":
                continue
            self.assertNotIn("FunctionUrlConfig", props, name)
            self.assertNotIn("Timeout", props, f"{name} keeps the 29 s of Globals")
            self.assertNotIn("HELIX_GATEWAY_TIMEOUT_MS", props.get("Environment", {}).get("Variables", {}), name)

    def test_the_solver_lives_as_long_as_the_turns_that_call_it(self):
        solver = self.functions["SolverFunction"]
        self.assertEqual(solver["Timeout"], {"Ref": "TurnFunctionTimeout"})
        self.assertEqual(solver["FunctionUrlConfig"]["AuthType"], "NONE")
        self.assertNotIn("Events", solver, "the solver is never behind the 30 s HTTP API")

    def test_every_http_api_route_waits_the_gateways_whole_limit(self):
        for name, props in self.functions.items():
            for event_name, event in props.get("Events", {}).items():
                if event["Type"] == "HttpApi":
                    self.assertEqual(int(event["Properties"]["TimeoutInMillis"]), HTTP_API_LIMIT_MS, event_name)

    def test_the_mcp_function_url_can_be_the_mcp_functions_own_origin(self):
        p = self.params["McpFunctionUrlOrigin"]
        self.assertEqual(p["Default"], "")
        self.assertEqual(
            self.t["Conditions"]["HasMcpFunctionUrlOrigin"], {"Fn::Not": [{"Fn::Equals": [{"Ref": "McpFunctionUrlOrigin"}, ""]}]}
        )
        env = self.env(self.functions["McpFunction"])
        on, off = "HasMcpFunctionUrlOrigin", 0
        self.assertEqual(
            env["CASIMIR_PUBLIC_BASE_URL"], {"Fn::If": [on, {"Ref": "McpFunctionUrlOrigin"}, {"Ref": "CasimirPublicBaseUrl"}]}
        )
        # The resource is the audience, on that origin (config refuses any other pairing).
        self.assertEqual(
            env["HELIX_AGENT_OAUTH_AUDIENCE"],
            {"Fn::If": [on, {"Fn::Sub": "${McpFunctionUrlOrigin}/mcp"}, {"Ref": "OAuthAudience"}]},
        )
        hosts = env["HELIX_AGENT_ALLOWED_HOSTS"]["Fn::If"]
        self.assertEqual(hosts[off], on)
        template, values = hosts[1]["Fn::Sub"]
        self.assertTrue(template.startswith("${AllowedHosts},${FunctionUrlHosts},"), template)
        self.assertIn("${OwnHost}", template)
        self.assertEqual(values["OwnHost"], {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "McpFunctionUrlOrigin"}]}]})
        self.assertEqual(env["TRUST_PROXY"], "apigateway", "a function URL event is HTTPS-only, as the gateway's")
        # The agent-access page then gives clients that URL.
        self.assertEqual(
            self.env(self.functions["AccountFunction"])["HELIX_AGENT_MCP_URL"],
            {"Fn::If": [on, {"Fn::Sub": "${McpFunctionUrlOrigin}/mcp"}, {"Ref": "AWS::NoValue"}]},
        )
        # No other function moves: REST, discovery and the pages keep the canonical origin.
        for name, props in self.functions.items():
            if name not in ("McpFunction", "AccountFunction"):
                self.assertNotIn("McpFunctionUrlOrigin", str(props.get("Environment", {})), name)
        self.assertIn("McpOAuthResource", self.t["Outputs"])

    def test_each_function_that_runs_turns_may_invoke_itself_and_nothing_else(self):
        granted = {}
        for name, r in self.t["Resources"].items():
            if r["Type"] != "AWS::IAM::Policy":
                continue
            for statement in r["Properties"]["PolicyDocument"]["Statement"]:
                if "lambda:InvokeFunction" in str(statement["Action"]):
                    granted[name] = (r["Properties"]["Roles"], statement["Action"], statement["Resource"])
        expected = {
            f"{fn[: -len('Function')]}SelfInvoke": ([{"Ref": f"{fn}Role"}], "lambda:InvokeFunction", {"Fn::GetAtt": [fn, "Arn"]})
            for fn in TURN_FUNCTIONS
        }
        self.assertEqual(granted, expected)
        # No function's own policies grant an Invoke (of itself or of another function).
        for name, props in self.functions.items():
            self.assertNotIn("lambda:Invoke", str(props.get("Policies", "")), name)

    def test_the_function_url_hosts_are_outputs(self):
        for name in TURN_FUNCTIONS:
            self.assertIn(f"{name}UrlHost", self.t["Outputs"])


if __name__ == "__main__":
    unittest.main()
