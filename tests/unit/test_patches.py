"""DSMO's changes share one generation marker per execution (dsmo/workflows/common/patches.py)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from dsmo.workflows.common.patches import GENERATION_CHANGES, GENERATION_PATCH, REVISION, REVISION_CHANGES

REPO = Path(__file__).resolve().parents[2]
HISTORIES = REPO / "tests" / "histories"
# Asked for its marker alone (a worker without rewinds must not run a rewound run): never folded.
# And changes of helper workflows (a throttle bucket, a key lock), whose starts carry no revision.
ON_ITS_OWN = {"rewind", "throttle-ended-turns-passed-on", "key-lock-replaces"}


def _patch_constants() -> dict[str, str]:
    found = {}
    for path in (REPO / "dsmo" / "workflows").rglob("*.py"):
        for name, value in re.findall(r'^([A-Z_]+_PATCH) = "([^"]+)"', path.read_text(), re.M):
            found[value] = f"{path.name}:{name}"
    return found


def _patch_markers(name: str) -> list[str]:
    events = json.loads((HISTORIES / f"{name}.json").read_text())["history"]["events"]
    ids = []
    for event in events:
        attributes = event.get("markerRecordedEventAttributes") or {}
        if attributes.get("markerName") != "core_patch":
            continue
        for payload in attributes["details"]["patch-data"]["payloads"]:
            ids.append(json.loads(base64.b64decode(payload["data"]))["id"])
    return ids


def test_the_generation_stands_for_every_change_there_is() -> None:
    constants = _patch_constants()
    assert GENERATION_PATCH == "dsmo-generation-1" and GENERATION_PATCH not in constants
    assert set(constants) - ON_ITS_OWN == set(GENERATION_CHANGES) | set(REVISION_CHANGES), (
        "a change is missing from the generation, or a typo"
    )


def test_a_run_of_this_generation_writes_one_marker() -> None:
    # The same flow (an early reply, local stages) started without `generation` in its request
    # (an older starter, a child run): before, a marker per change it reached; now one.
    assert _patch_markers("short_stages_early") == ["fewer-server-writes", "event-inbox"]
    assert _patch_markers("short_stages_generation") == [GENERATION_PATCH]


def test_a_run_started_for_this_generation_writes_none() -> None:
    # Its request says so (a DSMO starter sets `generation`): no marker, no change-version upsert.
    assert _patch_markers("short_stages_started_in_generation") == []
    # A change made since: asked by its own id by a run whose request has no revision (recorded
    # before revisions), taken without a marker by one whose request has it.
    assert _patch_markers("long_chat_round_trip") == ["hand-over-after-a-round-trip"]
    assert _patch_markers("migrated_from_revision") == []


def test_revisions_count_up_and_a_request_cannot_claim_one_this_code_lacks() -> None:
    from pydantic import ValidationError

    from dsmo.workflows.contracts.run_records import ExecutionRequest
    from dsmo.workflows.definition.model import parse_definition

    assert sorted(set(REVISION_CHANGES.values())) == list(range(1, REVISION + 1))
    definition = parse_definition(
        {"agent": "a", "start": "s", "nodes": {"s": {"actionType": "send_message", "parameters": {"message": "m"}}}}
    )
    assert ExecutionRequest(definition=definition, revision=REVISION).revision == REVISION
    try:
        ExecutionRequest(definition=definition, revision=REVISION + 1)
    except ValidationError as err:
        assert "revision" in str(err)
    else:
        raise AssertionError("a request claiming a later revision was taken")
    events = json.loads((HISTORIES / "short_stages_started_in_generation.json").read_text())["history"]["events"]
    upserts = [e["upsertWorkflowSearchAttributesEventAttributes"] for e in events if "upsertWorkflow" in str(e.keys())]
    assert all("TemporalChangeVersion" not in json.dumps(u) for u in upserts)


def _after_the_reply(name: str) -> list[str]:
    """What the workflow task that took the reply recorded after its update, in order."""
    events = json.loads((HISTORIES / f"{name}.json").read_text())["history"]["events"]
    accepted = next(i for i, e in enumerate(events) if e["eventType"].endswith("_UPDATE_ACCEPTED"))
    kinds = []
    for event in events[accepted + 1 :]:
        if event["eventType"].endswith("_WORKFLOW_TASK_SCHEDULED"):
            break
        marker = (event.get("markerRecordedEventAttributes") or {}).get("markerName")
        kinds.append(marker or event["eventType"].removeprefix("EVENT_TYPE_"))
    return kinds


def test_a_short_stage_in_the_task_that_took_a_reply_is_scheduled_with_the_reply_since_revision_7() -> None:
    # Before: run inside that task (a local activity's marker), before the reply was recorded.
    assert "core_local_activity" in _after_the_reply("short_stages_local")
    # Since: a regular activity the task's completion schedules, with the reply; no marker asked.
    after = _after_the_reply("short_stages_reply_recorded_first")
    assert "core_local_activity" not in after and "ACTIVITY_TASK_SCHEDULED" in after, after
    assert _patch_markers("short_stages_reply_recorded_first") == []
    # A start that carries its reply: the first task keeps it while the stage before the wait runs
    # locally, then the wait takes it in that task and the stage after it is scheduled.
    after = [kind for kind in _after_the_reply("reply_kept_in_the_first_task") if not kind.startswith("WORKFLOW_")]
    assert after[:2] == ["core_local_activity", "ACTIVITY_TASK_SCHEDULED"], after
    assert _patch_markers("reply_kept_in_the_first_task") == []
