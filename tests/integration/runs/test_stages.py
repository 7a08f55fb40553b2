"""run_agent failures: permanent errors fail the run at once, transient ones are retried."""

from __future__ import annotations

from typing import Any

import pytest

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration

CALLS: dict[str, int] = {}


def flaky(document: Any, message: StageMessage) -> ProcessorOutput:
    CALLS[message.run_id] = CALLS.get(message.run_id, 0) + 1
    if message.attempt < 3:
        raise ConnectionError(f"upstream unavailable (attempt {message.attempt})")
    return ProcessorOutput(document={"attempt": message.attempt}, summary={"ok": True})


def picky(document: Any, message: StageMessage) -> ProcessorOutput:
    CALLS[message.run_id] = CALLS.get(message.run_id, 0) + 1
    raise InvalidInput("input.amount: must be positive")


def steady(document: Any, message: StageMessage) -> ProcessorOutput:
    CALLS[message.run_id] = CALLS.get(message.run_id, 0) + 1
    return ProcessorOutput(document={"from": "second"}, summary={"ok": "second"})


def chatty(document: Any, message: StageMessage) -> ProcessorOutput:
    return ProcessorOutput(document={}, summary={"blob": "x" * 5000})


@pytest.fixture
def registry() -> ProcessorRegistry:
    registry = ProcessorRegistry()
    registry.register("flaky", "1.0.0")(flaky)
    registry.register("picky", "1.0.0")(picky)
    registry.register("chatty", "2.1.0")(chatty)
    registry.register("steady", "1.0.0")(steady)
    return registry


def one_stage(agent: str, max_attempts: int = 4) -> AgentDefinition:
    return parse_definition(
        {
            "agent": f"stage-{agent}",
            "start": "work",
            "nodes": {
                "work": {
                    "actionType": "run_agent",
                    "agent": agent,
                    "retry": {"maxAttempts": max_attempts, "initialInterval": "1s", "backoffCoefficient": 1.0},
                }
            },
        }
    )


async def test_transient_errors_are_retried_and_the_attempt_is_in_the_key(harness: Harness) -> None:
    definition = one_stage("flaky")
    run_id = await harness.start(definition, {"x": 1})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert CALLS[run_id] == 3
    stage = result.variables["stages"]["work"]
    assert stage["attempt"] == 3
    assert stage["outputUri"].endswith(f"/{definition.workflow_version}/{run_id}/work/attempt=3/output.json")
    assert harness.store.read_json(stage["outputUri"])["output"] == {"attempt": 3}


async def test_permanent_error_fails_the_run_without_retry(harness: Harness) -> None:
    """Seed: RUNNING -> FAILED ("Error en alguna accion"), with the FAILED record."""
    run_id = await harness.start(one_stage("picky"), {"amount": -1})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.result_type == "failure"
    assert result.failed_action_id == "work"
    assert result.error_message is not None and "input.amount: must be positive" in result.error_message
    assert CALLS[run_id] == 1
    view = await harness.dsmo.status(run_id)
    assert view.status is RunStatus.FAILED and view.error_message == result.error_message
    types = [e.type for e in await harness.dsmo.events(run_id)]
    assert types[-3:] == ["STAGE_FAILED", "DEAD_LETTERED", "RUN_ABORTED"]
    letter = harness.store.read_json(harness.store.uri(f"dlq/{run_id}/work.json"))
    assert letter["errorType"] == "InvalidInput" and letter["attempts"] == 1 and letter["variables"]["amount"] == -1
    described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    assert described.status is not None and described.status.name == "FAILED"


async def test_oversized_summary_is_a_contract_violation(harness: Harness) -> None:
    run_id = await harness.start(one_stage("chatty"), {})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED
    assert result.error_message is not None and "above the 4096-byte cap" in result.error_message


async def test_unknown_agent_fails_clearly(harness: Harness) -> None:
    run_id = await harness.start(one_stage("ghost"), {})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED
    assert result.error_message is not None and "agent 'ghost' is not registered" in result.error_message


async def test_missing_template_variable_fails_at_its_node(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "tpl",
            "start": "say",
            "nodes": {"say": {"actionType": "send_message", "parameters": {"message": "Hi {{who}}"}}},
        }
    )
    run_id = await harness.start(definition, {})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.failed_action_id == "say"
    assert result.error_message == "say: variable who is missing"
    assert harness.messages(run_id) == []


async def test_output_committed_by_an_unreported_attempt_is_reused_not_recomputed(harness: Harness) -> None:
    # As if attempt 1 wrote its output and the worker died before reporting it: the workflow
    # sees attempt 1 fail (here: flaky raises) and retries; attempt 2 finds the committed output.
    definition = one_stage("flaky")
    run_id = f"reuse-{harness.task_queue}"
    key = f"artifacts/{definition.workflow_version}/{run_id}/work/attempt=1/output.json"
    harness.store.put_json_once(key, {"output": {"from": "earlier attempt"}, "summary": {"ok": "earlier"}})
    await harness.start(definition, {}, run_id=run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert CALLS[run_id] == 1  # attempt 1 only: attempt 2 never ran the processor
    assert result.variables["stages"]["work"] == {
        "status": "succeeded",
        "outputUri": harness.store.uri(key),
        "summary": {"ok": "earlier"},
        "attempt": 1,
        "agentVersion": "1.0.0",
    }
    succeeded = [e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED"]
    assert succeeded[0].data["reused"] is True


async def test_a_second_first_execution_keeps_the_committed_output(harness: Harness) -> None:
    # A first execution never looks for earlier output (only retries can meet it), but if the
    # attempt's key is taken (a workflow reset), the committed output wins over the new one.
    definition = one_stage("steady")
    run_id = f"again-{harness.task_queue}"
    key = f"artifacts/{definition.workflow_version}/{run_id}/work/attempt=1/output.json"
    harness.store.put_json_once(key, {"output": {"from": "first"}, "summary": {"ok": "first"}})
    await harness.start(definition, {}, run_id=run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert CALLS[run_id] == 1
    assert result.variables["stages"]["work"]["summary"] == {"ok": "first"}
    assert harness.store.read_json(harness.store.uri(key))["output"] == {"from": "first"}
    succeeded = [e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED"]
    assert succeeded[0].data["reused"] is True


def short_stage(agent: str, **node: Any) -> AgentDefinition:
    """A stage with a 5 s timeout (local by default) and 0.2 s back-offs without jitter."""
    retry = {"maxAttempts": 4, "initialInterval": "200ms", "backoffCoefficient": 1.0, "jitter": 0}
    work = {"actionType": "run_agent", "agent": agent, "timeout": "5s", "retry": retry, **node}
    return parse_definition({"agent": f"short-{agent}", "start": "work", "nodes": {"work": work}})


async def history_of(harness: Harness, run_id: str) -> list[Any]:
    return list((await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()).events)


def backoffs_waited(events: list[Any]) -> list[float]:
    """Seconds between each 0.2 s timer's start and its firing, as the server recorded them."""
    started = {
        e.event_id: e.event_time.ToDatetime()
        for e in events
        if e.HasField("timer_started_event_attributes")
        and e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds() == 0.2
    }
    return [
        (e.event_time.ToDatetime() - started[e.timer_fired_event_attributes.started_event_id]).total_seconds()
        for e in events
        if e.HasField("timer_fired_event_attributes") and e.timer_fired_event_attributes.started_event_id in started
    ]


@pytest.mark.parametrize("local", [True, False])
async def test_a_short_stage_runs_locally_with_the_same_trail_and_its_backoffs_on_time(
    harness: Harness, local: bool
) -> None:
    definition = short_stage("flaky", **({} if local else {"local": False}))
    run_id = await harness.start(definition, {"x": 1})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and CALLS[run_id] == 3
    assert result.variables["stages"]["work"]["attempt"] == 3
    types = [e.type for e in await harness.dsmo.events(run_id) if e.type.startswith("STAGE_")]
    assert types == ["STAGE_ENQUEUED", "STAGE_FAILED"] * 2 + ["STAGE_ENQUEUED", "STAGE_STARTED", "STAGE_SUCCEEDED"]
    events = await history_of(harness, run_id)
    scheduled = [e for e in events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = [e for e in events if e.HasField("marker_recorded_event_attributes")]
    if local:  # three attempts, each a marker; no activity through the server
        assert scheduled == [] and len(markers) >= 3
    else:
        assert [e.activity_task_scheduled_event_attributes.activity_type.name for e in scheduled] == ["run_stage"] * 3
    # Each back-off is a 0.2 s workflow timer that fired no earlier than asked. How late it fires
    # depends on the server's timer queue (history.timerProcessorMaxTimeShift, 50 ms in the
    # embedded stack, tests/unit/test_compose.py) and on the machine's load: a suite under load
    # once saw 1.04 s, so the wait itself is `make bench`'s to report (bench/timer_probe.py).
    waited = backoffs_waited(events)
    assert len(waited) == 2 and all(seconds >= 0.2 for seconds in waited), waited


async def test_a_local_attempt_run_again_after_a_crash_reuses_what_it_wrote(harness: Harness) -> None:
    # A worker that dies after a local attempt wrote its output, before its workflow task
    # completed, leaves no record of the attempt: the next worker runs attempt 1 again. That
    # attempt finds the output and reports it; the processor does not run a second time.
    definition = short_stage("steady")
    run_id = f"local-again-{harness.task_queue}"
    folder = f"artifacts/{definition.workflow_version}/{run_id}/work/attempt=1"
    harness.store.put_json_once(f"{folder}/begun.json", {"attempt": 1})  # written before its agent ran
    harness.store.put_json_once(
        f"{folder}/output.json", {"output": {"from": "lost task"}, "summary": {"ok": "lost task"}}
    )
    await harness.start(definition, {}, run_id=run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert CALLS.get(run_id, 0) == 0
    assert result.variables["stages"]["work"]["summary"] == {"ok": "lost task"}
    succeeded = [e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED"]
    assert succeeded[0].attempt == 1 and succeeded[0].data["reused"] is True


async def test_a_local_attempt_whose_worker_died_in_it_counts_as_a_failed_attempt(harness: Harness) -> None:
    # The attempt began (its mark is written) and its worker died before it wrote its output:
    # run again by the next worker, it fails as WorkerLost, so a stage that kills every worker
    # that runs it uses up its attempts and is dead-lettered instead of looping for ever.
    definition = short_stage("steady")
    run_id = f"local-lost-{harness.task_queue}"
    harness.store.put_json_once(
        f"artifacts/{definition.workflow_version}/{run_id}/work/attempt=1/begun.json", {"attempt": 1}
    )
    await harness.start(definition, {}, run_id=run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["stages"]["work"]["attempt"] == 2
    assert CALLS[run_id] == 1  # attempt 2 only
    failed = [e for e in await harness.dsmo.events(run_id) if e.type == "STAGE_FAILED"]
    assert [(e.attempt, e.data["errorType"], e.data["kind"]) for e in failed] == [(1, "WorkerLost", "transient")]


def short_chain(agent: str) -> AgentDefinition:
    """Three short stages one after another (local by default), each on the previous one's output."""
    nodes = {
        "one": {"actionType": "run_agent", "agent": agent, "timeout": "5s", "next": "two"},
        "two": {
            "actionType": "run_agent",
            "agent": agent,
            "timeout": "5s",
            "input": "{{stages.one.outputUri}}",
            "next": "three",
        },
        "three": {"actionType": "run_agent", "agent": agent, "timeout": "5s", "input": "{{stages.two.outputUri}}"},
    }
    return parse_definition({"agent": f"chain-{agent}", "start": "one", "nodes": nodes})


def begun_marks(harness: Harness, definition: AgentDefinition, run_id: str) -> list[str]:
    folder = f"artifacts/{definition.workflow_version}/{run_id}/"
    return sorted(uri.split(folder, 1)[1] for uri in harness.store.list_uris(folder) if uri.endswith("/begun.json"))


async def test_a_chain_of_local_stages_in_one_workflow_task_marks_only_its_first_attempt(harness: Harness) -> None:
    # The workflow task replays its decisions in order after a crash: if its first local attempt
    # never began before, neither did the ones after it, so only the first writes a mark.
    definition = short_chain("steady")
    run_id = await harness.start(definition, {})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and CALLS[run_id] == 3
    assert begun_marks(harness, definition, run_id) == ["one/attempt=1/begun.json"]
    tasks = [e for e in await history_of(harness, run_id) if e.HasField("workflow_task_completed_event_attributes")]
    assert len(tasks) == 1  # the three attempts ran in one workflow task


async def test_after_a_crash_every_later_attempt_of_the_workflow_task_looks_for_its_output(harness: Harness) -> None:
    # A worker died in stage three after stages one (marked) and two (no mark) had committed:
    # the next worker runs the task again. Stage one finds its mark and reuses its output, so the
    # later stages mark and look for their outputs: stage two reuses the one it wrote without a
    # mark, and only stage three runs its agent.
    definition = short_chain("steady")
    run_id = f"chain-again-{harness.task_queue}"
    folder = f"artifacts/{definition.workflow_version}/{run_id}"
    harness.store.put_json_once(f"{folder}/one/attempt=1/begun.json", {"attempt": 1})
    for stage in ("one", "two"):
        harness.store.put_json_once(
            f"{folder}/{stage}/attempt=1/output.json", {"output": {"from": "lost task"}, "summary": {"ok": stage}}
        )
    await harness.start(definition, {}, run_id=run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and CALLS[run_id] == 1  # stage three
    marked = [f"{stage}/attempt=1/begun.json" for stage in ("one", "three", "two")]
    assert begun_marks(harness, definition, run_id) == marked
    reused = {e.stage: e.data["reused"] for e in await harness.dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED"}
    assert reused == {"one": True, "two": True, "three": False}


async def test_a_local_stage_that_cannot_succeed_is_dead_lettered(harness: Harness) -> None:
    run_id = await harness.start(short_stage("picky"), {"amount": -1})
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.failed_action_id == "work"
    assert result.error_message is not None and "input.amount: must be positive" in result.error_message
    types = [e.type for e in await harness.dsmo.events(run_id)]
    assert types[-3:] == ["STAGE_FAILED", "DEAD_LETTERED", "RUN_ABORTED"]
    letter = harness.store.read_json(harness.store.uri(f"dlq/{run_id}/work.json"))
    assert letter["errorType"] == "InvalidInput" and letter["attempts"] == 1
