"""The example processors are pure: same input, same output; and they refuse bad input clearly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.node_types import RetrySpec
from dsmo_examples.agents.documents import invoice_enrich, record_validate, rule_classify, text_extract

MESSAGE = StageMessage(
    run_id="r",
    correlation_id="r",
    stage="s",
    workflow_version="v",
    agent_version="1",
    artifact_in_uri="s3://b/i",
    artifact_out_uri="s3://b/o",
    idempotency_key="k",
    attempt=1,
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
)
INVOICE = {
    "document": {"text": "ACME Corp\nInvoice 7\nTotal: 99.90 EUR and tax 10 EUR\nbilling@acme.example 2026-11-01"}
}


def test_pipeline_of_pure_processors() -> None:
    extracted = text_extract(INVOICE, MESSAGE)
    assert extracted.document["amounts"] == [{"value": 99.9, "currency": "EUR"}, {"value": 10.0, "currency": "EUR"}]
    assert extracted.document["emails"] == ["billing@acme.example"] and extracted.document["dates"] == ["2026-11-01"]
    classified = rule_classify(extracted.document, MESSAGE)
    assert classified.summary["category"] == "invoice" and 0 < classified.summary["confidence"] <= 1
    enriched = invoice_enrich(classified.document, MESSAGE)
    assert enriched.document == {
        "vendor": "acme.example",
        "total": 99.9,
        "currency": "EUR",
        "status": "ok",
        "dates": ["2026-11-01"],
        "category": "invoice",
    }
    validated = record_validate(classified.document, MESSAGE)
    assert validated.summary == {"valid": True, "problemCount": 0}
    assert text_extract(INVOICE, MESSAGE) == extracted  # deterministic


def test_unclear_text_is_other() -> None:
    extracted = text_extract({"text": "see you soon"}, MESSAGE)
    assert rule_classify(extracted.document, MESSAGE).summary == {"category": "other", "confidence": 0.0}


@pytest.mark.parametrize("processor", [text_extract, rule_classify, invoice_enrich, record_validate])
def test_bad_input_is_invalid_input(processor: object) -> None:
    with pytest.raises(InvalidInput, match="input"):
        processor([1, 2], MESSAGE)  # type: ignore[operator]


def test_backoff_with_jitter() -> None:
    retry = RetrySpec(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=5),
        jitter=0.5,
    )
    assert [retry.delay(n, 0.0).total_seconds() for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert retry.delay(2, 0.999).total_seconds() == pytest.approx(2.999)
