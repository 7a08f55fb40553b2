"""A replay or what-if of a run that failed at a stage leaves nothing that can act: no dead letter
in the store, none listed as redrivable, and a letter an older DSMO left for one is refused by
redrive (with a one-line error) and starts nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.redrive import ReplayLetterRefused
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from tests.conftest import Harness, registry_with
from tests.polling import until

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def prepare(document: Any, message: StageMessage) -> ProcessorOutput:
    return ProcessorOutput(document={"prepared": True}, summary={"prepared": True})


def refund(document: Any, message: StageMessage) -> ProcessorOutput:
    raise InvalidInput("input.amount: must be a number")


@pytest.fixture
def registry() -> ProcessorRegistry:
    return registry_with({"noact-prepare": prepare, "noact-refund": refund})


def flow(agent: str, version: str) -> AgentDefinition:
    return parse_definition(
        {
            "agent": agent,
            "version": version,
            "start": "prepare",
            "nodes": {
                "prepare": {"actionType": "run_agent", "agent": "noact-prepare", "next": "refund"},
                "refund": {"actionType": "run_agent", "agent": "noact-refund", "next": "tell"},
                "tell": {"actionType": "send_message", "parameters": {"message": "refunded"}},
            },
        }
    )


def old_letter(harness: Harness, original: str, replay_id: str) -> str:
    """A letter for ``replay_id`` in the format a DSMO that dead-lettered replays wrote; its id."""
    letter: dict[str, Any] = harness.store.read_json(harness.store.uri(f"dlq/{original}/refund.json"))
    harness.store.put_json_once(f"dlq/{replay_id}/refund.json", {**letter, "runId": replay_id})
    return f"{replay_id}/refund"


async def refused(harness: Harness, letter_id: str) -> None:
    """Redrive refuses ``letter_id`` and starts nothing (not even under the id it was given)."""
    new_id = f"noact-redrive-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ReplayLetterRefused, match="is a replay of"):
        await harness.dsmo.redrive(letter_id, new_id=new_id)
    with pytest.raises(RPCError):
        await harness.dsmo.temporal.get_workflow_handle(new_id).describe()
    assert harness.store.list_uris(f"dlq/{letter_id}.redrive.json") == []


async def test_replays_and_what_ifs_of_a_failed_run_leave_no_dead_letter_and_theirs_are_never_redriven(
    harness: Harness, tmp_path: Path
) -> None:
    dsmo, store, agent = harness.dsmo, harness.store, f"noact-{uuid.uuid4().hex[:8]}"
    run_id = await harness.start(flow(agent, "1"))
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.FAILED and result.failed_action_id == "refund"
    assert [row.id for row in await dsmo.dead_letters(run_id=run_id)] == [f"{run_id}/refund"]  # the real one

    # A replay fails where the original did, and records the letter it did not write.
    report = await dsmo.replay(run_id, task_queue=harness.task_queue)
    harness.started.append(report.replay)
    assert report.same_path and report.replay_status == "failed" and report.problem is None
    assert store.list_uris(f"dlq/{report.replay}/") == []
    events = await dsmo.events(report.replay)
    assert "DEAD_LETTERED" not in [event.type for event in events]
    skipped = next(event for event in events if event.type == "DEAD_LETTER_SKIPPED")
    assert skipped.stage == "refund" and skipped.data["replayOf"] == run_id
    assert skipped.data["errorType"] == "InvalidInput"

    # So does a what-if against a candidate that was never published.
    query = f"AgentName = '{agent}'"

    async def listed_failed() -> bool:  # visibility is written asynchronously
        failed = f"{query} AND WorkflowId = '{run_id}' AND ExecutionStatus = 'Failed'"
        return (await dsmo.temporal.count_workflows(failed)).count > 0

    await until(listed_failed, f"visibility lists {run_id} as failed")
    what_if = await dsmo.what_if(f"WorkflowId = '{run_id}'", flow(agent, "2"), task_queue=harness.task_queue)
    (replayed,) = what_if.runs
    harness.started.append(replayed.replay_id)
    assert replayed.candidate_status == "failed" and replayed.same_path
    assert store.list_uris(f"dlq/{replayed.replay_id}/") == []

    # Letters an older DSMO wrote for such runs: not listed, and refused.
    letters = [old_letter(harness, run_id, report.replay), old_letter(harness, run_id, replayed.replay_id)]
    listed = {row.run_id for row in await dsmo.dead_letters()}
    assert run_id in listed and not {report.replay, replayed.replay_id} & listed
    for letter_id in letters:
        await refused(harness, letter_id)
    cli = subprocess.run(
        [str(BIN / "dsmo"), "dlq", "redrive", letters[1]],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )
    assert cli.returncode != 0 and cli.stderr.startswith(f"error: dead letter {letters[1]}: run "), cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1 and "never redriven" in cli.stderr
    listing = subprocess.run(
        [str(BIN / "dsmo"), "dlq", "list", "--json"],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=True,
    )
    assert not {report.replay, replayed.replay_id} & {row["run_id"] for row in json.loads(listing.stdout)}

    # Without the exported trail (a run still running, an export lost), Temporal still says it.
    store.delete_keys([f"audit/{replayed.replay_id}.jsonl"])
    await refused(harness, letters[1])
    assert harness.messages(report.replay) == [] and harness.messages(replayed.replay_id) == []
