"""Checks added after runs were in flight must not break those runs.

Four such changes: publish-time checks on definitions (template variables, unknown CEL
functions), the 64 KiB cap on event data, the strict event-id and shape rules on signals, and
the strict rules answering first for a signal that breaks its kind's rules too.
A run admitted or signalled before them must still decode, run and replay; new runs get the
new rules.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType

from dsmo.client import starts
from dsmo.workflows.common import patches
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from dsmo.workflows.events.resume_events import MAX_EVENT_BYTES
from dsmo.workflows.run.signal_rules import (
    EVENT_SIZE_CAP_PATCH,
    STRICT_RULES_FIRST_PATCH,
    STRICT_SIGNALS_PATCH,
)
from tests.conftest import Harness
from tests.unit.test_golden_histories import replayer

pytestmark = pytest.mark.integration

# Admitted before template variables were checked: `legacyName` is neither an input nor a variable.
LEGACY: dict[str, Any] = {
    "agent": "legacy-greeting",
    "inputs": ["customer"],
    "start": "hello",
    "nodes": {
        "hello": {
            "actionType": "send_message",
            "parameters": {"to": "{{customer}}", "message": "Hi {{legacyName | default('there')}}"},
        }
    },
}

WAIT_THEN_DONE: dict[str, Any] = {
    "agent": "evolution-wait",
    "start": "wait",
    "nodes": {"wait": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}},
}


@contextlib.contextmanager
def older_code(monkeypatch: pytest.MonkeyPatch, refused: Callable[[str], bool] = lambda change: True) -> Iterator[None]:
    """Runs started and driven in here run as on code before the ``refused`` changes.

    Started as an older starter does (no ``generation`` in the request), they take a refused
    change the old way and write no marker for it, and ask any other by its own id, as code
    before DSMO's generations did; so the current code replays them as they ran.
    """
    with monkeypatch.context() as patch:
        patch.setattr(starts, "GENERATION", None)
        patch.setattr(starts, "REVISION", None)
        patch.setattr(patches, "patched", lambda change: not refused(change) and workflow.patched(change))
        yield


async def takes_change(harness: Harness, run_id: str, patch_id: str) -> bool:
    """Whether the run's history says it takes the change: its request carries the generation
    (a DSMO starter's run), or its history has the generation's marker or the change's own."""
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0].data
    return json.loads(started).get("generation", 0) >= patches.GENERATION or any(
        [await has_patch_marker(harness, run_id, marker) for marker in (patch_id, patches.GENERATION_PATCH)]
    )


async def has_patch_marker(harness: Harness, run_id: str, patch_id: str = EVENT_SIZE_CAP_PATCH) -> bool:
    """Whether the run's history records the patch (local activities add markers too)."""
    events = harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history_events()
    return any(
        [
            e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and patch_id.encode() in e.marker_recorded_event_attributes.SerializeToString()
            async for e in events
        ]
    )


async def replays(harness: Harness, run_id: str) -> None:
    history = await harness.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def test_a_run_admitted_under_older_definition_checks_still_runs(harness: Harness) -> None:
    with pytest.raises(DefinitionError, match="unknown variable 'legacyName'"):
        parse_definition(LEGACY)
    # The run was started (as by an older client) with the definition the new checks refuse.
    run_id = "legacy-greeting-1"
    await harness.dsmo.temporal.start_workflow(
        "AgentExecution",
        {"definition": LEGACY, "input": {"customer": "ann"}},
        id=f"{run_id}-{harness.task_queue}",
        task_queue=harness.task_queue,
    )
    run_id = f"{run_id}-{harness.task_queue}"
    harness.started.append(run_id)
    result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    assert [m["message"] for m in harness.messages(run_id)] == ["Hi there"]
    await replays(harness, run_id)


async def test_a_big_signal_taken_before_the_cap_replays_and_new_runs_refuse_one(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = parse_definition(WAIT_THEN_DONE)
    # Within the payload's own rules (unknown fields are ignored), above the size cap.
    big = {"text": "hi", "attachment": "x" * (MAX_EVENT_BYTES + 10)}

    # A run on the code before the cap: no patch marker, the big reply is applied.
    with older_code(monkeypatch):
        old = await harness.start(definition)
        await harness.dsmo.wait_for_status(old, {RunStatus.WAITING})
        await harness.dsmo.temporal.get_workflow_handle(old).signal("MESSAGE_RECEIVED", {"event_id": "big-1", **big})
        result = await harness.dsmo.result(old)
    assert result.status is RunStatus.COMPLETED
    assert result.variables["lastResponse"] == "hi"
    assert not await has_patch_marker(harness, old)
    await replays(harness, old)  # the current code, with the cap, replays it as it ran

    # A new run: it takes the change and the same reply is refused; the run keeps waiting.
    new = await harness.start(definition)
    await harness.dsmo.wait_for_status(new, {RunStatus.WAITING})
    await harness.dsmo.temporal.get_workflow_handle(new).signal("MESSAGE_RECEIVED", {"event_id": "big-2", **big})
    await harness.dsmo.respond(new, "short", event_id="small-2")
    result = await harness.dsmo.result(new)
    assert result.variables["lastResponse"] == "short"
    rejected = [e for e in await harness.dsmo.events(new) if e.type == "EVENT_REJECTED"]
    assert len(rejected) == 1 and f"above the {MAX_EVENT_BYTES}-byte limit" in str(rejected[0].data)
    assert await takes_change(harness, new, EVENT_SIZE_CAP_PATCH)
    await replays(harness, new)


async def test_a_signal_taken_before_the_strict_rules_replays_and_new_runs_refuse_one(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = parse_definition(WAIT_THEN_DONE)
    # A trailing newline in the id and data nested 40 deep: both accepted before the rules.
    loose = {"event_id": "loose-1\n", "text": "hi", "nested": json.loads("[" * 40 + "]" * 40)}

    with older_code(monkeypatch):
        old = await harness.start(definition)
        await harness.dsmo.wait_for_status(old, {RunStatus.WAITING})
        await harness.dsmo.temporal.get_workflow_handle(old).signal("MESSAGE_RECEIVED", loose)
        result = await harness.dsmo.result(old)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "hi"
    assert not await has_patch_marker(harness, old, STRICT_SIGNALS_PATCH)
    await replays(harness, old)

    new = await harness.start(definition)
    await harness.dsmo.wait_for_status(new, {RunStatus.WAITING})
    await harness.dsmo.temporal.get_workflow_handle(new).signal("MESSAGE_RECEIVED", loose)
    await harness.dsmo.respond(new, "clean", event_id="clean-1")
    result = await harness.dsmo.result(new)
    assert result.variables["lastResponse"] == "clean"
    rejected = [e for e in await harness.dsmo.events(new) if e.type == "EVENT_REJECTED"]
    assert len(rejected) == 1 and "use 1-200 printable characters" in str(rejected[0].data)
    assert await takes_change(harness, new, STRICT_SIGNALS_PATCH)
    await replays(harness, new)


async def test_a_signal_breaking_two_rules_was_refused_for_its_kinds_before_and_for_the_strict_one_now(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = parse_definition(WAIT_THEN_DONE)
    # A trailing newline in the id (a strict rule) and no text (the reply's own rule).
    twice = {"event_id": "twice-1\n", "txt": "typo"}

    with older_code(monkeypatch):
        old = await harness.start(definition)
        await harness.dsmo.wait_for_status(old, {RunStatus.WAITING})
        await harness.dsmo.temporal.get_workflow_handle(old).signal("MESSAGE_RECEIVED", twice)
        await harness.dsmo.respond(old, "clean", event_id="clean-old")
        await harness.dsmo.result(old)
    rejected = [e for e in await harness.dsmo.events(old) if e.type == "EVENT_REJECTED"]
    assert [e.data["reason"] for e in rejected] == ["MESSAGE_RECEIVED.text: is required"]
    assert not await has_patch_marker(harness, old, STRICT_RULES_FIRST_PATCH)
    await replays(harness, old)

    # Now the answer every other way in gives for the same event (the update's validator, the client).
    new = await harness.start(definition)
    await harness.dsmo.wait_for_status(new, {RunStatus.WAITING})
    await harness.dsmo.temporal.get_workflow_handle(new).signal("MESSAGE_RECEIVED", twice)
    await harness.dsmo.respond(new, "clean", event_id="clean-new")
    await harness.dsmo.result(new)
    rejected = [e for e in await harness.dsmo.events(new) if e.type == "EVENT_REJECTED"]
    strict = "MESSAGE_RECEIVED.event_id 'twice-1\\n': use 1-200 printable characters"
    assert len(rejected) == 1 and str(rejected[0].data["reason"]).startswith(strict)
    assert await takes_change(harness, new, STRICT_RULES_FIRST_PATCH)
    await replays(harness, new)
