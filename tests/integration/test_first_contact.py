"""What a new user met first: numbers that changed type, runs started without DSMO's client."""

from __future__ import annotations

import json

import pytest

from activities.audit_log import audit_key
from tests.conftest import Harness
from workflows.definition import parse_definition
from workflows.status import RunStatus

pytestmark = pytest.mark.integration


async def test_an_integer_score_stays_an_integer_end_to_end(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "scored",
            "start": "exam",
            "nodes": {
                "exam": {"actionType": "assign_test", "parameters": {"test": "t1"}, "next": "tell"},
                "tell": {"actionType": "send_message", "parameters": {"message": "score={{testScore}}"}},
            },
        }
    )
    run_id = await harness.start(definition)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.signal_event(run_id, "TEST_COMPLETED", {"event_id": "t-1", "score": 87, "result": "passed"})
    result = await harness.dsmo.result(run_id)
    assert result.variables["testScore"] == 87 and type(result.variables["testScore"]) is int
    assert [m["message"] for m in harness.messages(run_id) if m.get("message")] == ["score=87"]
    resumed = [e for e in await harness.dsmo.events(run_id) if e.type == "RUN_RESUMED"]
    assert type(resumed[0].data["set"]["testScore"]) is int
    # The exported trail in the store says 87 too.
    lines = harness.store.read_bytes(harness.store.uri(audit_key(run_id))).decode().splitlines()
    exported = [json.loads(line) for line in lines]
    resumed_line = next(e for e in exported if e.get("type") == "RUN_RESUMED")
    assert type(resumed_line["data"]["set"]["testScore"]) is int  # JSON 87, not 87.0
