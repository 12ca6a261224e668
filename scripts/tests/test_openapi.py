"""docs/openapi.json (the committed copy of GET /openapi.json, kept current by a Rust
test) is a valid OpenAPI 3.1 document by an independent validator."""

import json
import unittest
from pathlib import Path

from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

ROOT = Path(__file__).resolve().parents[2]


class OpenApiTest(unittest.TestCase):
    def test_the_document_is_valid_openapi_3_1(self):
        doc = json.loads((ROOT / "docs" / "openapi.json").read_text())
        self.assertEqual(doc["openapi"], "3.1.0")
        validate(doc, cls=OpenAPIV31SpecValidator)

    def test_every_operation_names_its_security_and_the_error_response(self):
        doc = json.loads((ROOT / "docs" / "openapi.json").read_text())
        ops = [op for item in doc["paths"].values() for op in item.values()]
        self.assertGreaterEqual(len(ops), 30)
        for op in ops:
            self.assertTrue(op["security"], op["operationId"])
            self.assertEqual(op["responses"]["default"], {"$ref": "#/components/responses/Error"})


if __name__ == "__main__":
    unittest.main()
