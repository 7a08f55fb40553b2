"""The API's description says how to present a key and what every error looks like, and the
errors the ingress answers are what it says (checked against its own schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.server.ingress.app import create_app


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path).with_changes(ingress={"api_keys_file": str(tmp_path / "keys.json")})


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def _error_schema(spec: dict[str, Any]) -> dict[str, Any]:
    # The components alongside, so the schema's own `$ref`s resolve.
    return {**spec["components"]["schemas"]["ErrorBody"], "components": spec["components"]}


def test_every_route_names_its_key_schemes_and_its_errors_in_one_shape(settings: Settings) -> None:
    spec = create_app(settings).openapi()
    assert set(spec["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert spec["components"]["securitySchemes"]["apiKey"]["name"] == "X-API-Key"
    for path, method, op in _operations(spec):
        assert op["security"] == [{"bearer": []}, {"apiKey": []}], (method, path)
        # No key header among the parameters: the schemes say it.
        assert {p["name"].lower() for p in op.get("parameters", [])} & {"authorization", "x-api-key"} == set()
        errors = {status: answer for status, answer in op["responses"].items() if status >= "400"}
        assert {"400", "401", "403", "422", "429", "503"} <= set(errors), (method, path)
        for status, answer in errors.items():
            schema = answer["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # FastAPI's own shape, never answered
    assert "404" in spec["paths"]["/executions/{run_id}"]["get"]["responses"]
    assert {"409", "408", "413"} <= set(spec["paths"]["/executions"]["post"]["responses"])


def test_the_errors_the_ingress_answers_match_the_described_shape(settings: Settings) -> None:
    app = create_app(settings)
    schema = _error_schema(app.openapi())
    key = KeyStore(settings.api_keys_path).add("crm", ["start", "read"])
    # No lifespan: these answers come before any call to Temporal (the routes' client is never used).
    app.state.dsmo = None
    client = TestClient(app)
    answers = [
        client.get("/executions/r-1"),  # no key: 401
        client.get("/executions/r-1", headers={"Authorization": "Bearer nope"}),  # unknown key: 401
        client.post("/executions/r-1/cancel", headers={"X-API-Key": key}, json={"reason": "x"}),  # no scope: 403
        # HTTP's schemes are case-insensitive: `bearer` is read as `Bearer`; the body is refused.
        client.post("/executions", headers={"Authorization": f"bearer {key}"}, json={"agent": 3}),
    ]
    assert [answer.status_code for answer in answers] == [401, 401, 403, 422]
    for answer in answers:
        jsonschema.validate(answer.json(), schema)
    assert answers[3].json()["error"]["message"].startswith("agent: "), answers[3].text
