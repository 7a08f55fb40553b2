"""The `dsmo` command and the official `temporal` CLI against runs, over real processes."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry, default_registry
from dsmo.client.client_errors import RunNotFound
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from tests.conftest import Harness
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "candidate_screening.yaml"


async def cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=60
    )


def one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]


async def test_start_status_respond_and_temporal_list(harness: Harness) -> None:
    started = await cli(
        harness,
        "start",
        str(EXAMPLE),
        "--input",
        '{"candidate": {"name": "Luis", "phone": "600"}}',
        "--id",
        f"cli-{harness.task_queue}",
        "--json",
    )
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["runId"]
    assert run_id == f"cli-{harness.task_queue}"
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})

    status = await cli(harness, "status", run_id, "--json")
    view = json.loads(status.stdout)
    assert view["status"] == "waiting" and view["waitingFor"] == "response" and view["waitingUntil"]
    human = await cli(harness, "status", run_id)
    assert "waitingFor    response" in human.stdout and "/workflows/" + run_id in human.stdout

    # The official CLI finds the waiting run by the contract's search attribute. Visibility is
    # updated asynchronously after the workflow task, so poll until it lists the run.
    query = f"WaitingFor='response' AND WorkflowId='{run_id}'"
    listed_ids: list[str] = []

    async def listed_by_temporal() -> bool:
        nonlocal listed_ids
        listed = await temporal_cli(harness, "workflow", "list", "--query", query, "--output", "json")
        assert listed.returncode == 0, listed.stderr
        listed_ids = [row["execution"]["workflowId"] for row in json.loads(listed.stdout or "[]")]
        return bool(listed_ids)

    await until(listed_by_temporal, "the waiting run listed by `temporal workflow list`")
    assert listed_ids == [run_id]

    replied = await cli(harness, "respond", run_id, "sí, sigo interesado", "--event-id", "cli-reply")
    assert replied.returncode == 0 and "delivered: cli-reply" in replied.stdout
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    events = await cli(harness, "events", run_id)
    assert "RUN_RESUMED" in events.stdout and "RUN_COMPLETED" in events.stdout


async def test_bad_definition_is_one_line(harness: Harness, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("next: wait_reply", "next: wait_for_godot"))
    proc = await cli(harness, "start", str(bad))
    one_line_error(proc, "nodes.ask.next", "unknown node 'wait_for_godot'")


async def test_unknown_run_is_one_line(harness: Harness) -> None:
    one_line_error(await cli(harness, "status", "no-such-run"), "run 'no-such-run' not found")
    one_line_error(await cli(harness, "respond", "no-such-run", "hola"), "not found")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--input", "{not json"], ["--input: not valid JSON"]),
        (["--input", "[1, 2]"], ["--input: must be a JSON object"]),
    ],
)
async def test_bad_arguments_are_one_line(harness: Harness, args: list[str], fragments: list[str]) -> None:
    one_line_error(await cli(harness, "start", str(EXAMPLE), *args), *fragments)


async def test_debug_shows_the_traceback(harness: Harness) -> None:
    proc = await cli(harness, "--debug", "status", "no-such-run")
    assert proc.returncode != 0 and "Traceback" in proc.stderr


async def test_duplicate_run_id_is_refused(harness: Harness) -> None:
    run_id = f"dup-{harness.task_queue}"
    assert (
        await cli(
            harness, "start", str(EXAMPLE), "--input", '{"candidate": {"name": "A", "phone": "1"}}', "--id", run_id
        )
    ).returncode == 0
    one_line_error(await cli(harness, "start", str(EXAMPLE), "--id", run_id), f"run '{run_id}' already exists")


async def test_a_debounced_start_says_it_joined_and_waits_for_its_batch_s_run(harness: Harness, tmp_path: Path) -> None:
    definition = tmp_path / "debounced.yaml"
    definition.write_text(
        f"agent: cli-debounced-{harness.task_queue[-6:]}\n"
        "inputs: [order, inputs]\n"
        'debounce: {key: "{{order.id}}", period: 1s, mode: all}\n'
        "start: note\n"
        "nodes:\n"
        '  note: {actionType: send_message, parameters: {message: "lines {{inputs[0].order.line}}"}}\n'
    )
    first = await cli(harness, "start", str(definition), "--input", '{"order": {"id": "o-1", "line": 1}}')
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("joined the batch of run ") and "start 1 of it" in first.stdout, first.stdout
    # --wait waits for the batch's run to be started by its debouncer (once its key has been
    # quiet for the period), then for its end: the run does not exist when the start is answered.
    waited = await cli(
        harness, "start", str(definition), "--input", '{"order": {"id": "o-2", "line": 2}}', "--wait", "--json"
    )
    assert waited.returncode == 0, waited.stderr
    shown = json.loads(waited.stdout)
    assert (shown["status"], shown["gathered"]) == ("completed", 1), shown
    assert harness.messages(shown["runId"])[0]["message"] == "lines 2"
    batched = first.stdout.split("joined the batch of run ", 1)[1].split(" ", 1)[0]

    async def batched_run_ended() -> bool:  # it exists once its debouncer has started it
        try:
            return (await harness.dsmo.status(batched)).status is RunStatus.COMPLETED
        except RunNotFound:
            return False

    await until(batched_run_ended, f"{batched} started by its debouncer and ended")
    one_line_error(
        await cli(harness, "start", str(definition), "--input", '{"order": {"id": "o-3"}}', "--id", "mine"),
        "--id: a debounced definition's start takes none",
    )


SLOW = ProcessorRegistry()
# The slow stage runs until the test lets it go.
RELEASE = threading.Event()


@SLOW.register("slow-profile", version="1.0.0")
def _slow(document: object, message: StageMessage) -> ProcessorOutput:
    RELEASE.wait(120)  # a hang guard only
    return ProcessorOutput(document={"ok": True}, summary={})


@pytest.fixture
def registry() -> ProcessorRegistry:
    merged = ProcessorRegistry()
    for name in default_registry.names():
        processor = default_registry.get(name)
        merged.register(processor.name, processor.version)(processor.fn)
    merged.register("slow-profile", "1.0.0")(_slow)
    return merged


async def test_a_reply_sent_before_the_run_waits_is_kept_and_taken(harness: Harness, tmp_path: Path) -> None:
    slow = tmp_path / "slow.yaml"
    slow.write_text(
        EXAMPLE.read_text()
        .replace("agent: candidate-profile", "agent: slow-profile")
        .replace("{{stages.profile.summary.firstName}}", "{{candidate.name}}")
    )
    RELEASE.clear()
    started = await cli(harness, "start", str(slow), "--input", '{"candidate": {"name": "B", "phone": "2"}}', "--json")
    run_id = json.loads(started.stdout)["runId"]
    try:
        # The slow stage holds the run before its wait until the reply has been sent.
        await harness.dsmo.wait_for_status(run_id, {RunStatus.RUNNING})
        early = await cli(harness, "respond", run_id, "sí, ya", "--event-id", "early-1")
    finally:
        RELEASE.set()
    assert early.returncode == 0, early.stderr
    assert early.stdout.startswith(f"kept: early-1 for {run_id} (kept in the run's inbox"), early.stdout
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "sí, ya"
    # The run has ended: a reply now has no wait to go to, and is refused in one line.
    late = await cli(harness, "respond", run_id, "otra")
    one_line_error(late, "has already ended")


async def temporal_cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    address = ["--address", harness.settings.temporal.address, "--namespace", harness.settings.temporal.namespace]
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "temporal"), *args, *address], capture_output=True, text=True, timeout=60
    )


async def test_official_cli_signal_and_update(harness: Harness) -> None:
    from tests.conftest import definition_from

    definition = definition_from(EXAMPLE)
    run_id = await harness.start(definition, {"candidate": {"name": "T", "phone": "3"}})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})

    # The update refuses a bad payload with the validator's message, writing nothing...
    bad = await temporal_cli(
        harness,
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        run_id,
        "--name",
        "deliver_event",
        "--input",
        '{"type": "MESSAGE_RECEIVED", "event_id": "t1", "data": {}}',
    )
    assert bad.returncode != 0 and "MESSAGE_RECEIVED.text: is required" in bad.stdout + bad.stderr
    # ...and a plain signal with the contract's flat payload resumes the run.
    sent = await temporal_cli(
        harness,
        "workflow",
        "signal",
        "--workflow-id",
        run_id,
        "--name",
        "MESSAGE_RECEIVED",
        "--input",
        '{"event_id": "t2", "text": "desde la CLI"}',
    )
    assert sent.returncode == 0, sent.stderr
    result = await harness.dsmo.result(run_id)
    assert result.variables["lastResponse"] == "desde la CLI"
    assert not [e for e in await harness.dsmo.events(run_id) if e.type == "EVENT_REJECTED"]


async def test_watch_follows_a_run_live(harness: Harness) -> None:
    from tests.conftest import definition_from

    run_id = await harness.start(definition_from(EXAMPLE), {"candidate": {"name": "W", "phone": "5"}})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    watcher = await asyncio.create_subprocess_exec(
        str(BIN / "dsmo"),
        "runs",
        "watch",
        run_id,
        "--interval",
        "0.2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**harness.cli_env(), "PYTHONUNBUFFERED": "1"},  # each line as it is printed
    )
    assert watcher.stdout is not None
    # Reply only once the watcher has shown the run waiting, however long it took to start.
    head = b""
    while f"{run_id}: waiting".encode() not in head:
        line = await asyncio.wait_for(watcher.stdout.readline(), timeout=60)
        assert line, f"the watcher ended before showing the run waiting: {head.decode()}"
        head += line
    await harness.dsmo.respond(run_id, "visto")
    out, err = await asyncio.wait_for(watcher.communicate(), timeout=60)
    text = (head + out).decode()
    assert watcher.returncode == 0, err.decode()
    assert text.index("waiting") < text.index("RUN_RESUMED") < text.index("RUN_COMPLETED")
    assert f"{run_id}: completed" in text


async def test_bulk_cancel_with_a_query(harness: Harness) -> None:
    from tests.conftest import definition_from

    run_ids = [
        await harness.start(definition_from(EXAMPLE), {"candidate": {"name": f"B{i}", "phone": "1"}}) for i in range(3)
    ]
    for run_id in run_ids:
        await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    query = f"TaskQueue='{harness.task_queue}'"

    async def all_listed_waiting() -> bool:  # visibility catches up asynchronously
        waiting = f"{query} AND AgentExecutionStatus='waiting'"
        return len([r.id async for r in harness.dsmo.temporal.list_workflows(waiting)]) == 3

    await until(all_listed_waiting, "three runs listed as waiting")
    proc = await cli(harness, "cancel", "--query", query, "--reason", "campaign closed", "--by", "ops")
    assert proc.returncode == 0 and "cancelled 3 run(s)" in proc.stdout, proc.stdout + proc.stderr
    for run_id in run_ids:
        result = await harness.dsmo.result(run_id)
        assert (result.status, result.cancelled_by) == (RunStatus.CANCELLED, "ops")


async def test_cli_start_and_respond_join_one_trace(harness: Harness) -> None:
    """With an `OTEL_*` exporter the CLI traces too: `dsmo respond`, a separate process, joins the
    trace `dsmo start` opened (through the run's memo), and its spans are exported before exit."""
    env = {**harness.cli_env(), "OTEL_TRACES_EXPORTER": "console"}
    run_id = f"traced-cli-{harness.task_queue}"

    def dsmo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "dsmo"), *args], check=False, capture_output=True, text=True, env=env, timeout=60
        )

    started = await asyncio.to_thread(
        dsmo, "start", str(EXAMPLE), "--input", '{"candidate": {"name": "Eva", "phone": "611"}}', "--id", run_id
    )
    assert started.returncode == 0, started.stderr
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    replied = await asyncio.to_thread(dsmo, "respond", run_id, "sí")
    assert replied.returncode == 0, replied.stderr
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    start_spans, event_spans = _console_spans(started.stdout), _console_spans(replied.stdout)
    assert "dsmo.start candidate-screening" in start_spans, started.stdout
    assert event_spans["dsmo.event MESSAGE_RECEIVED"] == start_spans["dsmo.start candidate-screening"]


def _console_spans(output: str) -> dict[str, str]:
    """Span name -> trace id, from OpenTelemetry's console exporter (one JSON object per span)."""
    found = re.findall(r'"name": "([^"]+)",\s*"context": \{\s*"trace_id": "(0x[0-9a-f]+)"', output)
    return dict(found)
