"""One definition or one request must not wedge a worker: the cases an outside prober found."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import Harness
from workflows.definition import parse_definition
from workflows.status import RunStatus

pytestmark = pytest.mark.integration

PAIRS = "L.exists(a, L.exists(b, a + b == -1))"  # depth 2: publishable; its cost is the data's


def costly_definition() -> object:
    return parse_definition(
        {
            "agent": "costly-condition",
            "inputs": ["L"],
            "start": "check",
            "failSafe": "review",
            "nodes": {
                "check": {
                    "actionType": "send_message",
                    "parameters": {"message": "checking"},
                    "transitions": [{"when": PAIRS, "to": "found"}, {"to": "done"}],
                },
                "found": {"actionType": "send_message", "parameters": {"message": "found"}},
                "done": {"actionType": "send_message", "parameters": {"message": "done"}},
                "review": {"actionType": "send_message", "parameters": {"message": "review"}},
            },
        }
    )


async def test_a_costly_condition_is_a_contract_violation_and_the_worker_keeps_serving(harness: Harness) -> None:
    definition = costly_definition()
    # 5,000 x 5,000 visits (~50 s of evaluation inside one workflow task) if it were evaluated.
    costly = await harness.start(definition, {"L": list(range(5_000))})  # type: ignore[arg-type]
    normal = [await harness.start(definition, {"L": [1, 2, 3]}) for _ in range(5)]  # type: ignore[arg-type]
    results = await asyncio.wait_for(asyncio.gather(*(harness.dsmo.result(r) for r in [costly, *normal])), 60)
    assert results[0].status is RunStatus.COMPLETED and results[0].path == ["check", "review"]
    assert all(r.status is RunStatus.COMPLETED and r.path == ["check", "done"] for r in results[1:])
    events = await harness.dsmo.events(costly)
    violation = next(e for e in events if e.type == "CONTRACT_VIOLATION")
    assert "was not evaluated" in violation.data["reason"] and "above the budget" in violation.data["reason"]
    assert violation.data["routedTo"] == "review"
    await harness.replay_all()
