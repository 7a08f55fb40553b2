"""An agent whose output JSON cannot hold (a non-finite number, a set, an arbitrary object) breaks
its contract: the stage takes the fail-safe route at once, is never retried, and nothing is stored."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

from dsmo.activities.processors import Processor, ProcessorOutput, ProcessorRegistry, default_registry
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

OUTPUTS: dict[str, Any] = {
    "emit-nan": ProcessorOutput({"confidence": math.nan}, {"band": "low"}),
    "emit-infinity": ProcessorOutput({"total": 1.0}, {"total": math.inf}),
    "emit-set": ProcessorOutput({"tags": {"a", "b"}}),
    "emit-object": ProcessorOutput({"handle": object()}),
}


@pytest.fixture
def registry() -> ProcessorRegistry:
    registry = default_registry.copy()
    for name, output in OUTPUTS.items():

        def emit(document: Any, message: StageMessage, output: ProcessorOutput = output) -> ProcessorOutput:
            return output

        registry.register(name)(emit)
    return registry


@pytest.mark.parametrize(
    ("agent", "reason"),
    [
        ("emit-nan", "output.confidence: nan is not a JSON number"),
        ("emit-infinity", "summary.total: inf is not a JSON number"),
        ("emit-set", "output.tags: a Python set is not a JSON value"),
        ("emit-object", "output.handle: a Python object is not a JSON value"),
    ],
)
async def test_an_output_json_cannot_hold_is_a_contract_violation(harness: Harness, agent: str, reason: str) -> None:
    definition = {
        "agent": f"outputs-{agent}",
        "start": "emit",
        "failSafe": "review",
        "nodes": {
            "emit": {
                "actionType": "run_agent",
                "agent": agent,
                "retry": {"maxAttempts": 3, "initialInterval": "100ms"},
            },
            "review": {"actionType": "send_message", "parameters": {"message": "review"}},
        },
    }
    run_id = await harness.start(parse_definition(definition))
    result = await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert result.status is RunStatus.COMPLETED and result.path == ["emit", "review"]
    events = await harness.dsmo.events(run_id)
    assert f"agent {agent}: {reason}" in next(e for e in events if e.type == "CONTRACT_VIOLATION").data["reason"]
    assert [e.attempt for e in events if e.type == "STAGE_ENQUEUED"] == [1]  # never retried
    version = events[0].workflow_version
    assert not harness.store.list_uris(f"artifacts/{version}/{run_id}/emit/")  # nothing stored


async def test_an_agents_contract_is_checked_off_the_event_loop(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker runs on this test's event loop, on the main thread.
    on_the_loop: list[tuple[str, bool]] = []
    check_input, check_result = Processor.check_input, Processor.check_result

    def observed_input(self: Processor, document: Any) -> None:
        on_the_loop.append(("input", threading.current_thread() is threading.main_thread()))
        check_input(self, document)

    def observed_result(self: Processor, output: ProcessorOutput) -> None:
        on_the_loop.append(("result", threading.current_thread() is threading.main_thread()))
        check_result(self, output)

    monkeypatch.setattr(Processor, "check_input", observed_input)
    monkeypatch.setattr(Processor, "check_result", observed_result)
    definition = {
        "agent": "outputs-loop",
        "start": "emit",
        "nodes": {"emit": {"actionType": "run_agent", "agent": "emit-nan"}},
    }
    run_id = await harness.start(parse_definition(definition))
    await asyncio.wait_for(harness.dsmo.result(run_id), 60)
    assert on_the_loop == [("input", False), ("result", False)]
