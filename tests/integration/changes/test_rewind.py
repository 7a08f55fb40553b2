"""Rewinding a run on the real stack: a waiting run goes back to an earlier node with corrections,
its later saga steps undone once, no earlier agent called again (counted), its trail still one chain."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import pytest

from dsmo.activities.actions import ActionContext, ActionRegistry
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.client.client_errors import RewindNotAccepted
from dsmo.client.definition_files import parse_definition_text
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import StageMessage
from dsmo.workflows.definition.model import AgentDefinition
from tests.conftest import Harness
from tests.migration_versions import history_length
from tests.rewind_flow import waiting_at

pytestmark = pytest.mark.asyncio

CALLS: Counter[str] = Counter()
LOCK = threading.Lock()
COUNTING = ProcessorRegistry()
# What the hold action did, in order: ("hold" | "release", run, key).
LEDGER: list[tuple[str, str, str]] = []


def _count(name: str) -> None:
    with LOCK:
        CALLS[name] += 1


@COUNTING.register("rewind-profile", "1.0.0")
def _profile(document: object, message: StageMessage) -> ProcessorOutput:
    _count(f"{message.run_id}:profile")
    return ProcessorOutput(document={"profiled": True}, summary={"profiled": True})


@COUNTING.register("rewind-reader", "1.0.0")
def _reader(document: dict[str, Any], message: StageMessage) -> ProcessorOutput:
    _count(f"{message.run_id}:read")
    return ProcessorOutput(document={"read": True}, summary={"name": document.get("name")})


class Hold:
    """A reservation made once per key and released once per key (a saga step with an effect outside)."""

    name = "rewind-hold"

    def execute(self, data: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        with LOCK:
            if ("hold", ctx.run_id, ctx.key) not in LEDGER:
                LEDGER.append(("hold", ctx.run_id, ctx.key))
        return {"holdKey": ctx.key, "status": "active", "for": data.get("for")}

    def compensate(self, output: dict[str, Any], ctx: ActionContext) -> bool:
        with LOCK:
            if ("release", ctx.run_id, output["holdKey"]) in LEDGER:
                return False
            LEDGER.append(("release", ctx.run_id, output["holdKey"]))
        return True

    def is_compensatable(self, output: dict[str, Any]) -> bool:
        return True


@pytest.fixture
def registry() -> ProcessorRegistry:
    return COUNTING


@pytest.fixture
def actions() -> ActionRegistry:
    registry = ActionRegistry()
    registry.add(Hold())
    return registry


FLOW = """
agent: {agent}
version: "1"
inputs: [applicant]
start: profile
nodes:
  profile:
    actionType: run_agent
    agent: rewind-profile
    next: docs
  docs:
    actionType: request_document
    parameters: {{documents: [id], to: "{{{{applicant}}}}", timeout: 1h, onTimeout: fail}}
    next: read
  read:
    actionType: run_agent
    agent: rewind-reader
    input: "{{{{documentUrls[0]}}}}"
    next: reserve
  reserve:
    actionType: invoke
    action: rewind-hold
    input: {{for: "{{{{stages.read.summary.name}}}}"}}
    compensate: {{kind: annulment}}
    next: sign
  sign:
    actionType: request_signature
    parameters: {{document: "https://example.com/c.pdf", to: "{{{{applicant}}}}", timeout: 1h, onTimeout: fail}}
    next: done
  done:
    actionType: send_message
    parameters: {{message: "signed for {{{{stages.read.summary.name}}}}", to: "{{{{applicant}}}}"}}
"""


def _flow() -> AgentDefinition:
    return parse_definition_text(FLOW.format(agent=f"rewind-{uuid.uuid4().hex[:8]}"))


def _document(harness: Harness, name: str) -> str:
    return harness.store.put_json_once(f"uploads/{uuid.uuid4().hex[:8]}/{name}.json", {"name": name}).uri


async def _upload(harness: Harness, run_id: str, url: str) -> None:
    await harness.dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id", "url": url})


async def _waiting_for_signature(harness: Harness, document: str) -> str:
    run_id = await harness.start(_flow(), {"applicant": "wrong@example.com"})
    await waiting_at(harness, run_id, "docs")
    await _upload(harness, run_id, _document(harness, document))
    await waiting_at(harness, run_id, "sign")
    return run_id


async def test_a_run_waiting_for_a_signature_goes_back_to_the_document_step_and_completes(
    harness: Harness,
) -> None:
    dsmo = harness.dsmo
    run_id = await _waiting_for_signature(harness, "Wrong")
    first_read = next(e for e in await dsmo.events(run_id) if e.type == "STAGE_SUCCEEDED" and e.stage == "read")

    ack = await dsmo.rewind(
        run_id, "docs", set_variables={"applicant": "ana@right.example"}, reason="wrong document", by="ops"
    )
    assert (ack.from_node, ack.to_node, ack.compensated, ack.left) == ("sign", "docs", ["reserve"], [])

    view = await waiting_at(harness, run_id, "docs")
    assert view.waiting_for == "document" and view.path == ["profile", "docs"]
    variables = await dsmo.variables(run_id)
    # As when it first entered `docs`, plus the correction: the first read and hold are not current.
    assert variables["applicant"] == "ana@right.example"
    assert set(variables["stages"]) == {"profile"} and "documentUrls" not in variables
    assert "reserve" not in variables.get("steps", {})
    # The document is asked for again, of the corrected address.
    assert harness.messages(run_id)[-1]["to"] == "ana@right.example"

    await _upload(harness, run_id, _document(harness, "Ana"))
    await waiting_at(harness, run_id, "sign")
    await dsmo.deliver_event(run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://d/signed.pdf"})
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED, result.error_message
    assert result.path == ["profile", "docs", "read", "reserve", "sign", "done"]
    assert harness.messages(run_id)[-1]["message"] == "signed for Ana"

    # Nothing before `docs` ran again; `read` ran once per document (never while going back).
    assert (CALLS[f"{run_id}:profile"], CALLS[f"{run_id}:read"]) == (1, 2)
    # The first document's reading stays in the store, no longer the run's current output.
    assert harness.store.read_json(first_read.artifact_uris[0])["output"] == {"read": True}
    assert result.variables["stages"]["read"]["outputUri"] != first_read.artifact_uris[0]
    # The hold made after `docs` was released exactly once, and made again under a new key.
    mine = [(what, key) for what, run, key in LEDGER if run == run_id]
    assert [what for what, _ in mine] == ["hold", "release", "hold"]
    assert mine[0][1] == mine[1][1] != mine[2][1]

    events = await dsmo.events(run_id)
    rewound = [e for e in events if e.type == "RUN_REWOUND"]
    assert len(rewound) == 1
    data = rewound[0].data
    assert (data["fromNode"], data["toNode"], data["set"], data["compensate"]) == (
        "sign",
        "docs",
        {"applicant": "ana@right.example"},
        True,
    )
    assert (data["requestedBy"], data["reason"], data["sagaSteps"]) == ("ops", "wrong document", ["reserve"])
    undone = [e for e in events if e.type == "COMPENSATION_STARTED"]
    assert [(e.stage, e.data["trigger"]) for e in undone] == [("reserve", "rewind")]
    # Going back recorded nothing twice: `profile` ran once in the trail, `read` once per document.
    assert [e.stage for e in events if e.type == "STAGE_SUCCEEDED" and e.stage in ("profile", "read")] == [
        "profile",
        "read",
        "read",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    verified = await dsmo.verify_trail(run_id)
    assert verified.ok, verified.problem
    assert await dsmo.verify_history(run_id) is None
    # A replay follows the run's current line: the same path, reading Ana's document, no agent called.
    report = await dsmo.replay(run_id, task_queue=harness.task_queue)
    harness.started.append(report.replay)
    assert report.same_path and report.replay_status == "completed", report
    assert (CALLS[f"{report.replay}:profile"], CALLS[f"{report.replay}:read"]) == (1, 1)


async def test_going_back_twice_follows_the_run_s_current_line(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await _waiting_for_signature(harness, "One")
    # Back to the stage itself: it reads the same document again, as a new output.
    await dsmo.rewind(run_id, "read", reason="the reader was fixed")
    await waiting_at(harness, run_id, "sign")
    assert CALLS[f"{run_id}:read"] == 2
    # Then back to the documents: the record re-executed is the current line (one read, one hold).
    await dsmo.rewind(run_id, "docs", reason="wrong person", set_variables={"applicant": "b@example.com"})
    # Sent at once, while the run is still on its way back: kept for the documents wait, taken there.
    await _upload(harness, run_id, _document(harness, "Two"))
    await waiting_at(harness, run_id, "sign")
    await dsmo.deliver_event(run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://d/s.pdf"})
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED, result.error_message
    assert result.path == ["profile", "docs", "read", "reserve", "sign", "done"]
    assert (CALLS[f"{run_id}:profile"], CALLS[f"{run_id}:read"]) == (1, 3)
    assert harness.messages(run_id)[-1]["message"] == "signed for Two"
    mine = [what for what, run, _ in LEDGER if run == run_id]
    assert mine == ["hold", "release", "hold", "release", "hold"]
    assert await dsmo.verify_history(run_id) is None


async def test_without_compensation_the_later_saga_steps_stay_done(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await _waiting_for_signature(harness, "Kept")
    ack = await dsmo.rewind(run_id, "docs", reason="re-upload", compensate=False)
    assert (ack.compensated, ack.left) == ([], ["reserve"])
    await waiting_at(harness, run_id, "docs")
    assert [what for what, run, _ in LEDGER if run == run_id] == ["hold"]
    rewound = next(e for e in await dsmo.events(run_id) if e.type == "RUN_REWOUND")
    assert rewound.data["compensate"] is False and rewound.data["sagaSteps"] == ["reserve"]
    await dsmo.cancel(run_id, reason="done with it")


async def test_every_refusal_is_one_line_and_writes_nothing(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(_flow(), {"applicant": "x@example.com"})
    await waiting_at(harness, run_id, "docs")
    before = (await history_length(dsmo, run_id), len(await dsmo.events(run_id)))
    refusals: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"to_node": "sign"}, DsmoError, "never reached 'sign'"),
        ({"to_node": "nowhere"}, DsmoError, "'nowhere' is not a node"),
        ({"to_node": "docs", "reason": " "}, DsmoError, "--reason"),
        ({"to_node": "docs", "set_variables": {"nobody": 1}}, RewindNotAccepted, "set: no node from 'docs' on reads"),
        ({"to_node": "docs", "set_variables": {"stages": {}}}, RewindNotAccepted, "set: 'stages' holds"),
    ]
    for asked, error, words in refusals:
        kwargs = {"reason": "test", **asked}
        with pytest.raises(error) as refused:
            await dsmo.rewind(run_id, **kwargs)
        message = str(refused.value)
        assert words in message and "\n" not in message, message
    assert (await history_length(dsmo, run_id), len(await dsmo.events(run_id))) == before

    await dsmo.cancel(run_id, reason="ended")
    await dsmo.wait_for_status(run_id, {RunStatus.CANCELLED})
    with pytest.raises(RewindNotAccepted, match=r"has ended .*fork it instead"):
        await dsmo.rewind(run_id, "docs", reason="too late")


async def test_a_run_whose_record_cannot_be_re_executed_ends_as_itself(harness: Harness) -> None:
    """A record that does not answer a wait on the way back (here: one sent without its events)
    fails the run as the run it was: its trail records it, its own saga steps are undone."""
    from dsmo.workflows.contracts.replay_plan import ReplayPlan
    from dsmo.workflows.contracts.rewind_io import REWIND_UPDATE, RewindAck, RewindRequest

    dsmo = harness.dsmo
    run_id = await _waiting_for_signature(harness, "Lost")
    plan = ReplayPlan(of=run_id, live_from="sign", rewinding=True)  # no recorded events
    request = RewindRequest(to_node="sign", reason="no record", plan=plan)
    handle = dsmo.temporal.get_workflow_handle(run_id)
    ack = await handle.execute_update(REWIND_UPDATE, request, result_type=RewindAck)
    assert ack.compensated == []  # nothing was done after `sign`
    result = await dsmo.result(run_id)
    assert (result.status, result.failed_action_id) == (RunStatus.FAILED, "docs")
    assert "never resumed" in (result.error_message or "")
    assert result.compensation is not None and result.compensation["compensated"] == ["reserve"]
    assert [what for what, run, _ in LEDGER if run == run_id] == ["hold", "release"]
    events = await dsmo.events(run_id)
    assert events[-1].type == "RUN_ABORTED"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
