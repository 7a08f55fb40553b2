"""Every example agent declares what it reads and the summary it returns, the declared schemas
hold for what it really returns, and the reference page is generated from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dsmo.activities.processors import default_registry
from dsmo.client.agent_catalog import local_catalog, markdown
from tests.unit.test_processors import MESSAGE

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
INVOICE = "ACME Corp\nInvoice 2026-001 of 2026-01-15\nTotal due: 1250.50 EUR\nbilling@acme.example"


def run(name: str, document: Any) -> Any:
    processor = default_registry.get(name)
    jsonschema.validate(document, processor.input_schema or {})
    output = processor.fn(document, MESSAGE)
    jsonschema.validate(output.summary, processor.summary_schema or {})
    return output


def test_the_reference_page_is_generated_from_the_schemas() -> None:
    assert REFERENCE.read_text() == markdown(local_catalog()), (
        "regenerate: DSMO_LOAD=dsmo_examples dsmo agents list --markdown > docs/agents.md"
    )


def test_every_built_in_processor_declares_input_and_summary() -> None:
    rows = local_catalog()["agents"]
    assert {row["name"] for row in rows} >= {
        "candidate-profile",
        "text-extract",
        "rule-classify",
        "invoice-enrich",
        "record-validate",
        "llm-summarize",
    }
    for row in rows:
        assert row["description"] and row["inputSchema"] and row["summarySchema"], row["name"]
        assert row["summarySchema"].get("properties"), row["name"]


def test_the_document_pipeline_returns_what_it_declares() -> None:
    extracted = run("text-extract", {"document": {"text": INVOICE}})
    assert extracted.summary == {"wordCount": 11, "hasAmount": True, "emailCount": 1}
    classified = run("rule-classify", extracted.document)
    assert classified.summary["category"] == "invoice"
    enriched = run("invoice-enrich", classified.document)
    assert enriched.summary == {"total": 1250.5, "currency": "EUR", "status": "ok"}
    validated = run("record-validate", extracted.document)
    assert validated.summary == {"valid": True, "problemCount": 0}


def test_candidate_profile_returns_what_it_declares() -> None:
    output = run("candidate-profile", {"candidate": {"name": "  ana  lópez ", "phone": "+34 600", "skills": ["Go"]}})
    assert output.summary == {"firstName": "Ana", "hasPhone": True, "skillCount": 1}


@pytest.mark.parametrize("bad", [{"candidate": {}}, {"person": {"name": "x"}}])
def test_the_declared_input_refuses_what_the_processor_refuses(bad: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, default_registry.get("candidate-profile").input_schema or {})
