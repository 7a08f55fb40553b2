"""The DSMO paper's goals G3 (replay), G4 (robust operation) and G5 (references, not payloads)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.activities.artifacts import ArtifactStore, StoredArtifact
from dsmo.activities.messaging import FileChannel
from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry, default_registry
from dsmo.client import replay as replays
from dsmo.client.redrive import AlreadyRedriven
from dsmo.worker import build_worker
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.contracts.subject_io import SubjectSeal
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BIN = Path(sys.executable).parent
INVOICE = "ACME Corp\nInvoice 2026-001\nTotal due: 1250.50 EUR\nbilling@acme.example"
CALLS: dict[str, int] = {}
FIXED: set[str] = set()


def counted(document: Any, message: StageMessage) -> ProcessorOutput:
    CALLS[message.run_id] = CALLS.get(message.run_id, 0) + 1
    return ProcessorOutput(document={"seen": message.stage}, summary={"ok": True})


def picky(document: Any, message: StageMessage) -> ProcessorOutput:
    if message.correlation_id not in FIXED:
        raise InvalidInput("input.total: must be a number")
    return ProcessorOutput(document={"fixed": True}, summary={"fixed": True})


def flaky(document: Any, message: StageMessage) -> ProcessorOutput:
    CALLS[message.run_id] = CALLS.get(message.run_id, 0) + 1
    if message.attempt < 3:
        raise TimeoutError("upstream timed out")
    return ProcessorOutput(document={"attempt": message.attempt}, summary={})


def measure(document: Any, message: StageMessage) -> ProcessorOutput:
    return ProcessorOutput(document={"items": len(document["items"])}, summary={"items": len(document["items"])})


@pytest.fixture
def registry() -> ProcessorRegistry:
    merged = ProcessorRegistry()
    for name in default_registry.names():
        processor = default_registry.get(name)
        merged.register(processor.name, processor.version)(processor.fn)
    for name, fn in (("counted", counted), ("picky", picky), ("flaky", flaky), ("measure", measure)):
        merged.register(name, "1.0.0")(fn)
    return merged


# -- G3: replay ----------------------------------------------------------------------------


async def test_g3_replaying_a_run_20_times_gives_the_same_path(harness: Harness) -> None:
    definition = definition_from(EXAMPLES / "triage.yaml")
    run_id = await harness.start(definition, {"document": {"text": INVOICE}})
    original = await harness.dsmo.result(run_id)
    assert original.status is RunStatus.COMPLETED
    # One reading of the original, twenty replays of it, five running at a time.
    planned = await replays.plan_replay(harness.dsmo.core, harness.store, run_id)
    gate = asyncio.Semaphore(5)

    async def one() -> replays.ReplayReport:
        async with gate:
            return await replays.replay(
                harness.dsmo.core, harness.store, run_id, task_queue=harness.task_queue, planned=planned
            )

    reports = await asyncio.gather(*(one() for _ in range(20)))
    assert {tuple(r.replay_path) for r in reports} == {("extract", "classify", "enrich", "notify")}
    assert all(r.same_path and r.replay_status == "completed" for r in reports)
    # Deterministic processors reproduce every stage output byte for byte.
    assert all(not r.differing_outputs for r in reports)
    assert len({r.replay for r in reports}) == 20
    replayed = await harness.dsmo.events(reports[0].replay)
    assert replayed[0].data["replayOf"] == run_id
    assert harness.messages(reports[0].replay) == []  # a replay never messages anyone


async def test_g3_replay_of_a_human_in_the_loop_run_uses_the_recorded_events(harness: Harness) -> None:
    slice_definition = definition_from(EXAMPLES / "candidate_screening.yaml")
    run_id = await harness.start(slice_definition, {"candidate": {"name": "Ana", "phone": "1"}})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.respond(run_id, "sí")
    await harness.dsmo.result(run_id)
    report = await harness.dsmo.replay(run_id, task_queue=harness.task_queue)  # through the public client
    assert report.same_path and report.replay_path == ["profile", "ask", "wait_reply", "goodbye"]
    replayed = await harness.dsmo.result(report.replay)
    assert replayed.variables["lastResponse"] == "sí"


async def test_g3_replay_from_a_stage_reuses_the_earlier_outputs(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "three",
            "start": "a",
            "nodes": {
                "a": {"actionType": "run_agent", "agent": "counted", "next": "b"},
                "b": {"actionType": "run_agent", "agent": "counted", "next": "c"},
                "c": {"actionType": "run_agent", "agent": "counted"},
            },
        }
    )
    run_id = await harness.start(definition)
    await harness.dsmo.result(run_id)
    assert CALLS[run_id] == 3
    report = await harness.dsmo.replay(run_id, from_stage="c", task_queue=harness.task_queue)
    assert report.same_path and CALLS[report.replay] == 1  # only c was recomputed
    events = await harness.dsmo.events(report.replay)
    reused = {e.stage: e.data["reused"] for e in events if e.type == "STAGE_SUCCEEDED"}
    assert reused == {"a": True, "b": True, "c": False}


async def test_g3_verify_replays_the_history_on_the_current_code(harness: Harness) -> None:
    run_id = await harness.start(definition_from(EXAMPLES / "triage.yaml"), {"document": {"text": INVOICE}})
    await harness.dsmo.result(run_id)
    assert await harness.dsmo.verify_history(run_id) is None
    proc = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), "verify", run_id],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=60,
    )
    assert proc.returncode == 0 and "deterministic" in proc.stdout


# -- G4: retries, dedup, dead letters ------------------------------------------------------------


async def test_g4_transient_errors_retried_with_backoff_each_attempt_audited(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "retry",
            "start": "s",
            "nodes": {
                "s": {"actionType": "run_agent", "agent": "flaky", "retry": {"maxAttempts": 4, "initialInterval": "1s"}}
            },
        }
    )
    run_id = await harness.start(definition)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and CALLS[run_id] == 3
    events = await harness.dsmo.events(run_id)
    enqueued = [e for e in events if e.type == "STAGE_ENQUEUED"]
    failed = [e for e in events if e.type == "STAGE_FAILED"]
    assert [e.attempt for e in enqueued] == [1, 2, 3] and [e.attempt for e in failed] == [1, 2]
    assert all(e.data["kind"] == "transient" for e in failed)
    # Backoff: timers of 1 s then 2 s (x up to 1.2 jitter), each waited out before the next attempt.
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    assert len(timers) == 2 and 1.0 <= timers[0] <= 1.2 and 2.0 <= timers[1] <= 2.4
    gaps = [(enqueued[i + 1].at - failed[i].at).total_seconds() for i in range(2)]
    assert gaps[0] >= timers[0] and gaps[1] >= timers[1]


class DropAfterWrite(ArtifactStore):
    """The output is written, then the connection drops before the activity can report it."""

    dropped: set[str] = set()

    def put_json_once(self, key: str, document: Any, *, seal: SubjectSeal | None = None) -> StoredArtifact:
        stored = super().put_json_once(key, document, seal=seal)
        if "/attempt=1/output.json" in key and key not in self.dropped:
            self.dropped.add(key)
            raise ConnectionError("connection reset after the write")
        return stored


async def test_g4_a_retry_after_a_successful_write_commits_once(harness: Harness) -> None:
    store = DropAfterWrite(harness.store.s3, harness.store.bucket)
    queue = harness.task_queue + "-drop"
    definition = parse_definition(
        {"agent": "once", "start": "s", "nodes": {"s": {"actionType": "run_agent", "agent": "counted"}}}
    )
    async with build_worker(
        harness.dsmo.temporal,
        task_queue=queue,
        store=store,
        channel=FileChannel(harness.outbox),
        registry=harness_registry(),
    ):
        run_id = (await harness.dsmo.start(definition, task_queue=queue)).run_id
        result = await harness.dsmo.result(run_id)
        events = await harness.dsmo.events(run_id)
    assert result.status is RunStatus.COMPLETED
    assert CALLS[run_id] == 1  # the processor ran once; attempt 2 found its committed output
    duplicates = [e for e in events if e.type == "DUPLICATE_IGNORED"]
    assert len(duplicates) == 1 and duplicates[0].attempt == 2 and duplicates[0].data["committedAttempt"] == 1
    assert [e.type for e in events].count("STAGE_SUCCEEDED") == 1
    outputs = harness.store.list_uris(f"artifacts/{definition.workflow_version}/{run_id}/s/")
    assert [uri.rsplit("/", 2)[1] for uri in outputs] == ["attempt=1"]


def harness_registry() -> ProcessorRegistry:
    registry = ProcessorRegistry()
    registry.register("counted", "1.0.0")(counted)
    return registry


async def test_g4_permanent_error_dead_letter_then_redrive(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "redrive",
            "start": "prep",
            "inputs": ["total"],
            "nodes": {
                "prep": {"actionType": "run_agent", "agent": "counted", "next": "bill"},
                "bill": {"actionType": "run_agent", "agent": "picky", "next": "done"},
                "done": {"actionType": "send_message", "parameters": {"message": "billed"}},
            },
        }
    )
    correlation = f"corr-{uuid.uuid4().hex[:8]}"
    run_id = (
        await harness.dsmo.start(
            definition, {"total": "abc"}, task_queue=harness.task_queue, correlation_id=correlation
        )
    ).run_id
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.failed_action_id == "bill"
    events = await harness.dsmo.events(run_id)
    assert [e.type for e in events][-3:] == ["STAGE_FAILED", "DEAD_LETTERED", "RUN_ABORTED"]
    assert [e.attempt for e in events if e.type == "STAGE_ENQUEUED" and e.stage == "bill"] == [1]  # not retried
    rows = [row for row in await harness.dsmo.dead_letters() if row.run_id == run_id]
    assert [(row.stage, row.error_type, row.attempts) for row in rows] == [("bill", "InvalidInput", 1)]

    # Redriven before the cause is fixed: that run fails too, which leaves the letter redrivable.
    too_soon = await harness.dsmo.redrive(f"{run_id}/bill")
    assert (await harness.dsmo.result(too_soon)).status is RunStatus.FAILED
    FIXED.add(correlation)  # the cause is fixed (e.g. a new agent build); reprocess the stage
    redriven = await harness.dsmo.redrive(f"{run_id}/bill")
    fixed = await harness.dsmo.result(redriven)
    assert fixed.status is RunStatus.COMPLETED
    assert (await harness.dsmo.status(redriven)).path == ["bill", "done"]  # from the failed stage on
    first = (await harness.dsmo.events(redriven))[0]
    assert first.data["redriveOf"] == run_id and first.data["startAt"] == "bill"
    assert CALLS.get(redriven) is None  # prep was not run again
    listed = [row for row in await harness.dsmo.dead_letters() if row.run_id == run_id]
    assert listed[0].redriven_as == redriven
    # Redriven once: a second redrive would start a second live run and lose the first's record.
    with pytest.raises(AlreadyRedriven, match=f"was redriven already, as run {redriven}, which has not failed"):
        await harness.dsmo.redrive(f"{run_id}/bill")
    assert await harness.dsmo.redrive(f"{run_id}/bill", new_id=redriven) == redriven  # the same one: done
    assert [row.redriven_as for row in await harness.dsmo.dead_letters(run_id=run_id)] == [redriven]
    with pytest.raises(DsmoError, match=r"^dead letter '\.\./x/y': "):
        await harness.dsmo.redrive("../x/y")


# -- G5: references, not payloads ----------------------------------------------------------------


async def test_g5_history_size_does_not_grow_with_the_artifact(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "sizes",
            "start": "m",
            "inputs": ["doc"],
            "nodes": {"m": {"actionType": "run_agent", "agent": "measure", "input": "{{doc}}"}},
        }
    )
    sizes = {}
    tag = uuid.uuid4().hex[:8]
    for name, items in (("small", 40), ("large", 400_000)):  # ~1 KB and ~10 MB of JSON
        document = {"items": [f"item-{i:08d}-{'x' * 8}" for i in range(items)]}
        stored = harness.store.put_json_once(f"inputs/{tag}/{name}.json", document)
        run_id = await harness.start(definition, {"doc": stored.uri}, run_id=f"g5-{name}-{tag}")
        result = await harness.dsmo.result(run_id)
        assert result.variables["stages"]["m"]["summary"]["items"] == items
        described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
        sizes[name] = (stored.size, described.raw_description.workflow_execution_info.history_size_bytes)
    (small_artifact, small_history), (large_artifact, large_history) = sizes["small"], sizes["large"]
    assert small_artifact < 2_000 and large_artifact > 9_000_000
    assert abs(large_history - small_history) / small_history < 0.05, sizes


def test_g5_the_processor_api_has_no_way_to_name_a_stage() -> None:
    import dataclasses

    assert [f.name for f in dataclasses.fields(ProcessorOutput)] == ["document", "summary", "inference"]
    assert json.dumps(sorted(StageMessage.model_fields)) == json.dumps(
        sorted(
            [
                "run_id",
                "correlation_id",
                "stage",
                "workflow_version",
                "agent_version",
                "artifact_in_uri",
                "artifact_out_uri",
                "idempotency_key",
                "attempt",
                "created_at",
                "config_ref",
            ]
        )
    )
