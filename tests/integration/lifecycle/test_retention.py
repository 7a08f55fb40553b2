"""Retention on the real store: markers written when a run ends, a sweep removing exactly what is due."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import ScheduleActionStartWorkflow
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from dsmo.activities.artifacts import ArtifactStore, run_input_key
from dsmo.activities.audit_log import audit_key
from dsmo.activities.retention_markers import ENDED_PREFIX, FAILED_PREFIX, SWEEPS_PREFIX, TRAILS_PREFIX
from dsmo.activities.retention_sweeping import MARKER_ATTEMPTS, RetentionActivities
from dsmo.activities.run_generations import generations
from dsmo.client.history_deletion import until_gone
from dsmo.runtime.provisioning import ensure_sweep_schedule, sweep_schedule_id
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.retention_io import SWEEP_WORKFLOW, SweepBatch, SweepCounts, SweepOutcome
from dsmo.workflows.contracts.slot_io import delivery_key
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo.workflows.lifecycle.retention_sweep import SweepStart
from tests.conftest import Harness
from tests.integration.lifecycle.test_subjects import history_gone

pytestmark = pytest.mark.integration


def one_message(retention: dict[str, str] | None) -> AgentDefinition:
    body: dict[str, Any] = {
        "agent": f"kept-{uuid.uuid4().hex[:8]}",
        "start": "hello",
        "nodes": {"hello": {"actionType": "send_message", "parameters": {"to": "a@example.com", "message": "hi"}}},
    }
    if retention is not None:
        body["retention"] = retention
    return parse_definition(body)


def clear_retention(store: ArtifactStore) -> None:
    """Markers of earlier runs in a shared bucket would be due in the skipped-ahead time too."""
    store.delete_keys([store.key_of(uri)[1] for uri in store.list_uris("retention/")])


def exists(store: ArtifactStore, key: str) -> bool:
    return store.stored_or_none(key) is not None


async def finished(harness: Harness, definition: AgentDefinition) -> str:
    run_id = await harness.start(definition, {"note": "x"})
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    return run_id


async def sweep(harness: Harness, time_env: WorkflowEnvironment, ahead: timedelta = timedelta(0)) -> SweepOutcome:
    # As of the server's time now, or ``ahead`` of it: waiting for a result lets the time-skipping
    # server skip ahead (years, when nothing holds it), so the sweep is not left to read its own
    # clock. A sweep days ahead is what a sweep days later sees, with no skip to wait for (a skip
    # waits on every workflow that server holds, other tests' included).
    as_of = await time_env.get_current_time() + ahead
    with time_env.auto_time_skipping_disabled():
        outcome: SweepOutcome = await time_env.client.execute_workflow(
            SWEEP_WORKFLOW,
            SweepStart(as_of=as_of),
            id=f"sweep-{uuid.uuid4().hex[:8]}",
            task_queue=harness.task_queue,
            result_type=SweepOutcome,
        )
    return outcome


async def test_a_sweep_removes_exactly_what_is_due(skipping: Harness, time_env: WorkflowEnvironment) -> None:
    store = skipping.store
    clear_retention(store)
    short = one_message({"ended": "1d", "trail": "3d"})
    long = one_message({"ended": "10d"})
    kept = one_message(None)
    runs = {name: await finished(skipping, d) for name, d in (("short", short), ("long", long), ("kept", kept))}
    inputs = {
        name: run_input_key(d.workflow_version, runs[name])
        for name, d in (("short", short), ("long", long), ("kept", kept))
    }
    markers = [store.key_of(uri)[1] for uri in store.list_uris(ENDED_PREFIX)]
    assert sorted(key.rsplit("/", 1)[1] for key in markers) == sorted(f"{runs[n]}.json" for n in ("short", "long"))
    # A start delivered to a run (onBusy: deliver) is the run's: its input and message go with it.
    delivered = delivery_key(runs["short"], "d-1")
    store.put_json_once(delivered, {"input": {"text": "a person's words"}})

    nothing = await sweep(skipping, time_env)
    assert nothing.counts == SweepCounts() and all(exists(store, key) for key in inputs.values())
    assert all(skipping.messages(run_id) for run_id in runs.values())

    first = await sweep(skipping, time_env, timedelta(days=2))
    assert (first.counts.runs, first.counts.trails) == (1, 0) and first.counts.objects >= 1
    assert not exists(store, inputs["short"]) and exists(store, audit_key(runs["short"]))  # its trail is kept longer
    # The message the file channel wrote for it went with its data; the others' stay.
    assert not (skipping.outbox / runs["short"]).exists()
    assert skipping.messages(runs["long"]) and skipping.messages(runs["kept"])
    assert not exists(store, delivered)
    assert exists(store, inputs["long"]) and exists(store, inputs["kept"])
    assert [uri.rsplit("/", 1)[1] for uri in store.list_uris(TRAILS_PREFIX)] == [f"{runs['short']}.json"]

    second = await sweep(skipping, time_env, timedelta(days=4))
    assert (second.counts.runs, second.counts.trails) == (0, 1)
    assert not exists(store, audit_key(runs["short"]))
    assert exists(store, inputs["long"]) and exists(store, audit_key(runs["long"])) and exists(store, inputs["kept"])
    recorded = [
        json.loads(store.stored_or_none(store.key_of(uri)[1]) or b"{}") for uri in store.list_uris(SWEEPS_PREFIX)
    ]
    assert {record["sweepId"] for record in recorded} >= {first.sweep_id, second.sweep_id}


async def test_a_sweep_killed_halfway_resumes_and_counts_each_run_once(harness: Harness) -> None:
    """On the dev server: histories deleted too. The first attempt dies after deleting a run's
    objects, the second after counting another run and before dropping its marker; the sweep's
    outcome still counts every run, object and history once."""
    store = harness.store
    clear_retention(store)
    definition = one_message({"ended": "1h"})
    runs = [await finished(harness, definition) for _ in range(3)]
    sweep_id = f"killed-{uuid.uuid4().hex[:6]}"
    later = SweepBatch(as_of=datetime.now(UTC) + timedelta(hours=2), sweep_id=sweep_id)
    deaths = ["objects deleted", "done"]

    def dies(step: str, run_id: str) -> None:
        if deaths and step == deaths[0]:
            deaths.pop(0)
            raise ConnectionError(f"worker killed after {step}")

    activities = RetentionActivities(store, harness.dsmo.temporal, fault=dies)
    for _ in range(2):
        with pytest.raises(ConnectionError):
            await ActivityEnvironment().run(activities.sweep_retention, later)
    last = await ActivityEnvironment().run(activities.sweep_retention, later)
    assert last.more is False and last.runs < 3  # this attempt alone did not see every run removed
    outcome = await asyncio.to_thread(
        ActivityEnvironment().run,
        activities.record_sweep,
        SweepOutcome(sweep_id=sweep_id, as_of=later.as_of, counts=last),
    )
    assert (outcome.counts.runs, outcome.counts.objects, outcome.counts.histories) == (3, 3, 3)
    for run_id in runs:
        assert not exists(store, run_input_key(definition.workflow_version, run_id))
        await history_gone(harness, run_id)
    assert await ActivityEnvironment().run(activities.sweep_retention, later) == SweepCounts()
    assert store.list_uris("retention/done/") == []  # dropped once the outcome was kept


def chatty(retention: dict[str, str]) -> AgentDefinition:
    """A loop on one wait that ends on "stop": a short history limit makes it continue as new often."""
    return parse_definition(
        {
            "agent": f"chatty-{uuid.uuid4().hex[:8]}",
            "start": "listen",
            "retention": retention,
            "nodes": {
                "listen": {
                    "actionType": "wait_for_event",
                    "parameters": {"event": "message", "timeout": "30d"},
                    "transitions": [{"when": 'eventResult == "stop"', "to": "bye"}, {"to": "listen"}],
                },
                "bye": {"actionType": "send_message", "parameters": {"to": "a@example.com", "message": "bye"}},
            },
        }
    )


async def test_a_sweep_deletes_every_generation_of_a_run_whatever_visibility_has_indexed(harness: Harness) -> None:
    """The sweep finds a run's executions in Temporal's own histories, not in visibility: a run that
    continued as new five times has six histories, and all six go."""
    store = harness.store
    clear_retention(store)
    definition = chatty({"ended": "1h"})
    run_id = await harness.start(definition, {}, history_limit=30)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    current = (await harness.dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    sent = 0
    while len(executions := await generations(harness.dsmo.temporal, run_id, current)) < 6:
        assert sent < 200, "the run never continued as new five times"
        await harness.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "more"}, event_id=f"more-{sent}")
        sent += 1
        current = (await harness.dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    await harness.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "stop"}, event_id="stop")
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    executions = await generations(harness.dsmo.temporal, run_id, current)
    assert len(executions) == 6

    activities = RetentionActivities(store, harness.dsmo.temporal)
    later = SweepBatch(as_of=datetime.now(UTC) + timedelta(hours=2), sweep_id=f"gens-{uuid.uuid4().hex[:6]}")
    counts = await ActivityEnvironment().run(activities.sweep_retention, later)
    assert (counts.runs, counts.histories) == (1, 6)
    assert await until_gone(harness.dsmo.temporal, [(run_id, each) for each in executions]) == []


async def test_a_marker_that_keeps_failing_is_set_aside_and_stops_no_sweep(harness: Harness) -> None:
    store = harness.store
    clear_retention(store)
    definition = one_message({"ended": "1h"})
    stuck, fine = [await finished(harness, definition) for _ in range(2)]

    def refuses(step: str, run_id: str) -> None:
        if step == "counted" and run_id == stuck:
            raise PermissionError("the store refuses this run's objects")

    activities = RetentionActivities(store, harness.dsmo.temporal, fault=refuses)
    later = SweepBatch(as_of=datetime.now(UTC) + timedelta(hours=2), sweep_id=f"aside-{uuid.uuid4().hex[:6]}")
    for _ in range(MARKER_ATTEMPTS - 1):
        with pytest.raises(PermissionError):
            await ActivityEnvironment().run(activities.sweep_retention, later)
    counts = await ActivityEnvironment().run(activities.sweep_retention, later)
    assert counts.failed == 1 and not exists(store, run_input_key(definition.workflow_version, fine))
    assert [uri.rsplit("/", 1)[1] for uri in store.list_uris(FAILED_PREFIX)] == [f"{stuck}.json"]
    assert await ActivityEnvironment().run(activities.sweep_retention, later) == SweepCounts()


async def test_the_embedded_stack_sets_its_namespace_retention(harness: Harness) -> None:
    described = await harness.dsmo.temporal.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=harness.settings.temporal.namespace)
    )
    kept = described.config.workflow_execution_retention_ttl.ToTimedelta()
    assert kept == harness.settings.temporal.history_retention == timedelta(days=30)


async def test_the_worker_s_sweep_schedule_is_created_once_and_follows_its_interval(harness: Harness) -> None:
    settings = harness.settings.with_changes(temporal={"task_queue": harness.task_queue})
    handle = harness.dsmo.temporal.get_schedule_handle(sweep_schedule_id(harness.task_queue))
    try:
        for every, expected in (("1h", timedelta(hours=1)), ("15m", timedelta(minutes=15))):
            await ensure_sweep_schedule(harness.dsmo.temporal, settings.with_changes(store={"sweep_every": every}))
            described = await handle.describe()
            assert [spec.every for spec in described.schedule.spec.intervals] == [expected]
        action = described.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow) and action.workflow == SWEEP_WORKFLOW
        assert action.task_queue == harness.task_queue
    finally:
        await handle.delete()
