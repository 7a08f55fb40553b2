"""Replay (the paper's G3): re-execute a run as a new linked run and compare the two paths, every
visit of every stage; verify a run's Temporal history against the current workflow code.

A replay is started only when a worker polls its task queue, and is given up (terminated) when
no worker takes it: it never waits for good (replay_runs.py).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from dsmo.activities.artifacts import ArtifactErased, ArtifactStore, run_input_key
from dsmo.client import moved_runs, run_status, run_trails
from dsmo.client.client_errors import RunNotFound
from dsmo.client.core import ClientCore
from dsmo.client.record_lines import current_line, recorded_llm_visits, reused_outputs, stage_visits
from dsmo.client.recorded_outputs import action_output
from dsmo.client.replay_runs import run_replay
from dsmo.client.trail_store import erased_artifacts
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import derived_run_id
from dsmo.workflows.contracts.replay_plan import RecordedAction, RecordedResume, ReplayPlan
from dsmo.workflows.contracts.run_records import AuditEvent, ExecutionRequest, StatusView
from dsmo.workflows.contracts.trail_io import values_digest
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.node_types import LlmNode

# How a replay's failure says the record could not answer it (not that the run failed as recorded).
RECORD_LIMITS = ("replay diverged", "llm replay:")


def record_problem(error_message: str | None) -> str | None:
    """Why a replay could not follow its record (a wait or model call it never answered), or None."""
    error = error_message or ""
    return error if any(sign in error for sign in RECORD_LIMITS) else None


@dataclass
class ReplayReport:
    """What `DsmoClient.replay` found: the original's and the replay's paths and outputs, side by side.

    Attributes:
        original: The replayed run's id.
        replay: The replay's run id.
        original_path: The nodes the original ran, in order.
        replay_path: The nodes the replay ran, in order.
        original_status: How the original ended.
        replay_status: How the replay ended.
        first_divergence: The index of the first step where the paths differ (None: the same path).
        outputs: Per stage visit (``node``, then ``node.v2``, ... when a loop visits it again), the
            sha256 of its committed output in the original and in the replay.
        answers: With ``rerun_llm``: per `llm` stage visit whose answer changed, each changed field.
        problem: Why the replay could not follow the record (a wait the record never answered, a
            model call it never recorded), if so: the paths then say nothing about the run.
    """

    original: str
    replay: str
    original_path: list[str]
    replay_path: list[str]
    original_status: str
    replay_status: str
    first_divergence: int | None
    outputs: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    # With --rerun-llm: per `llm` stage visit whose answer changed, each changed field as `field: old -> new`.
    answers: dict[str, list[str]] = field(default_factory=dict)
    problem: str | None = None

    @property
    def same_path(self) -> bool:
        return self.first_divergence is None

    @property
    def differing_outputs(self) -> list[str]:
        return [node for node, (a, b) in self.outputs.items() if a != b]


def first_divergence(a: list[str], b: list[str]) -> int | None:
    for index, (left, right) in enumerate(zip(a, b, strict=False)):
        if left != right:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def _outputs(events: list[AuditEvent]) -> dict[str, str]:
    """Per stage visit, the sha256 of the output it committed."""
    return {key: str(event.data.get("outputSha256")) for key, event in stage_visits(events)}


def _output_uris(events: list[AuditEvent]) -> dict[str, tuple[str, str]]:
    """Per stage visit, its node and the output it committed."""
    return {key: (str(event.stage), event.artifact_uris[0]) for key, event in stage_visits(events)}


def answer_changes(before: Any, after: Any, path: str = "") -> list[str]:
    """The fields where two answers differ, as ``field: old -> new`` (JSON values), in order."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[str] = []
        for key in [*before, *(key for key in after if key not in before)]:
            where = f"{path}.{key}" if path else str(key)
            changes += answer_changes(before.get(key, _ABSENT), after.get(key, _ABSENT), where)
        return changes
    if before == after:
        return []
    return [f"{path or 'answer'}: {_shown(before)} -> {_shown(after)}"]


_ABSENT = object()


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


async def load_snapshot(store: ArtifactStore, config_ref: str | None) -> AgentDefinition:
    if not config_ref:
        raise DsmoError("the run has no config snapshot (config_ref); it cannot be replayed")
    snapshot = store.read_json(config_ref)
    return AgentDefinition.model_validate(snapshot["definition"])


def resumed_values(store: ArtifactStore, event: AuditEvent) -> dict[str, Any]:
    """The variables a RUN_RESUMED set: recorded inline, or (large ones) in the store by reference."""
    ref = event.data.get("setRef")
    if isinstance(ref, dict) and ref.get("uri"):
        values: dict[str, Any] = store.read_json(str(ref["uri"]))
        if values_digest(values) != ref.get("sha256"):
            raise DsmoError(f"{ref['uri']} does not hold the values RUN_RESUMED #{event.seq} recorded (sha256 differs)")
        return values
    if "setDigest" in event.data:  # a subject's run whose values could not be stored: the trail has only their digest
        raise DsmoError(f"RUN_RESUMED #{event.seq} kept only the digest of the values it set; they cannot be replayed")
    return dict(event.data.get("set") or {})


@dataclass(frozen=True)
class ReplayPlanned:
    request: ExecutionRequest
    original: StatusView
    events: list[AuditEvent]
    # Every node the record names: the start's, and (a moved run) each target version's.
    record_definition: AgentDefinition | None = None


async def plan_replay(
    core: ClientCore,
    store: ArtifactStore,
    run_id: str,
    from_stage: str | None = None,
    *,
    rerun_llm: bool = False,
    live: bool = False,
    option: str = "--from-stage",
) -> ReplayPlanned:
    """What a replay (or, with ``live``, a fork of a run that may still be running) re-executes."""
    view = await run_status.status(core, run_id)
    if not view.status.terminal and not live:
        raise DsmoError(f"run {run_id!r} is {view.status}; replay a run that has ended")
    # The snapshot the run started on (configRef): a replay starts there and moves where the run moved.
    definition = await load_snapshot(store, view.config_ref)
    events = current_line(await run_trails.events(core, run_id))
    moves = await moved_runs.recorded_moves(core, view.agent, events)
    problem = None if from_stage is None else moved_runs.node_problem(option, from_stage, definition, moves)
    if problem is not None:  # judged by the version the run is on now
        raise DsmoError(problem)
    if from_stage is not None and from_stage not in view.path:
        maps = [move.request.node_map for move in moves]
        entered_as = [node for node in view.path if moved_runs.renamed(node, maps) == from_stage]
        if entered_as:  # the wait it moved from inside of: never entered under the current name
            raise DsmoError(
                f"{option}: run {run_id} entered {from_stage!r} only as {entered_as[0]!r}, before it moved "
                f"from inside it; name the node after it"
            )
        raise DsmoError(f"{option}: run {run_id} never reached {from_stage!r} (path: {' -> '.join(view.path)})")
    recorded = moved_runs.record_definition(definition, moves)  # every node its record can name
    resumes: list[RecordedResume] = []
    waited: dict[str, str] = {}  # node -> what its latest wait waited for
    for e in events:
        if e.type == "RUN_WAITING" and e.stage:
            waited[e.stage] = str(e.data.get("waitingFor"))
        elif e.type == "RUN_MIGRATED" and e.data.get("waiting") and str(e.data.get("fromNode")) in waited:
            # Moved from inside its wait: the target's node goes on with the same wait, unannounced.
            waited[str(e.data.get("toNode"))] = waited[str(e.data.get("fromNode"))]
        elif e.type == "RUN_RESUMED":
            resumes.append(
                RecordedResume(
                    node=e.stage or "",
                    event_type=str(e.data.get("eventType")),
                    set=resumed_values(store, e),
                    kind=waited.get(e.stage or ""),
                )
            )
    if view.status.value == "timeout" and view.failed_action_id:
        node = view.failed_action_id
        resumes.append(RecordedResume(node=node, event_type="TIMEOUT", kind=waited.get(node)))
    # Saga actions have effects outside DSMO: a replay takes their recorded outcomes.
    actions = [
        RecordedAction(
            node=e.stage or "",
            output=action_output(store, e) if e.type == "STAGE_SUCCEEDED" else None,
            error=str(e.data.get("error")) if e.type == "STAGE_FAILED" else None,
        )
        for e in events
        if e.type in ("STAGE_SUCCEEDED", "STAGE_FAILED") and "action" in e.data
    ]
    reuse = reused_outputs(recorded, events, from_stage) if from_stage is not None else {}
    # A fork or rewind reuses every output up to where it goes live, and calls models from there.
    llm_records = None if live else recorded_llm_visits(recorded, events, store.uri)
    variables: dict[str, Any] = store.read_json(store.uri(run_input_key(definition.workflow_version, run_id)))
    request = ExecutionRequest(
        definition=definition,
        input=variables,
        correlation_id=run_id,
        origin={"replayOf": run_id, **({"fromStage": from_stage} if from_stage else {})},
        replay=ReplayPlan(
            of=run_id,
            resumes=resumes,
            reuse=reuse,
            actions=actions,
            rerun_llm=rerun_llm,
            moves=moves,
            llm_records=llm_records,
        ),
    )
    return ReplayPlanned(request, view, events, recorded)


async def replay(
    core: ClientCore,
    store: ArtifactStore,
    run_id: str,
    *,
    from_stage: str | None = None,
    task_queue: str | None = None,
    new_id: str | None = None,
    planned: ReplayPlanned | None = None,
    rerun_llm: bool = False,
) -> ReplayReport:
    """Replay ``run_id``; pass ``planned`` to replay many times from one reading of the original
    (queries on a closed run are answered by a worker replaying it, so they are not free).

    `llm` stages answer from the original's recorded responses, so a replay calls no model;
    with ``rerun_llm`` they call the model again and the report lists the answers that changed.
    Every visit of a stage is compared (a loop's third answer as much as its first).

    Raises:
        NoWorker: No worker polls the task queue, or none took the replay (it was terminated).
    """
    planned = planned or await plan_replay(core, store, run_id, from_stage, rerun_llm=rerun_llm)
    replay_id = new_id or derived_run_id(run_id, "replay", uuid.uuid4().hex[:8])
    result = await run_replay(core, planned.request, replay_id, task_queue)
    replay_view = await run_status.status(core, replay_id)
    replay_events = await run_trails.events(core, replay_id)
    original_outputs = _outputs(planned.events)
    replay_outputs = _outputs(replay_events)
    original_path = planned.original.path
    answers: dict[str, list[str]] = {}
    if planned.request.replay is not None and planned.request.replay.rerun_llm:
        before, after = _output_uris(planned.events), _output_uris(replay_events)
        nodes = (planned.record_definition or planned.request.definition).nodes
        for key in sorted(set(before) & set(after)):
            node, uri = before[key]
            if isinstance(nodes.get(node), LlmNode) and original_outputs.get(key) != replay_outputs.get(key):
                answers[key] = answer_changes(store.read_json(uri)["output"], store.read_json(after[key][1])["output"])
    return ReplayReport(
        original=run_id,
        replay=replay_id,
        original_path=original_path,
        replay_path=replay_view.path,
        original_status=planned.original.status.value,
        replay_status=result.status.value,
        first_divergence=first_divergence(original_path, replay_view.path),
        outputs={
            node: (original_outputs.get(node), replay_outputs.get(node))
            for node in sorted(set(original_outputs) | set(replay_outputs))
        },
        answers=answers,
        problem=record_problem(result.error_message),
    )


async def replay_run(core: ClientCore, run_id: str, **options: Any) -> ReplayReport:
    """`replay` from the client (see `RunHandle.replay`): a run whose subject was erased is refused in words."""
    store = core.artifacts
    try:
        return await replay(core, store, run_id, **options)
    except (RunNotFound, ArtifactErased):
        trail = await asyncio.to_thread(core.trail_store().export, run_id)
        if trail is None or not (await asyncio.to_thread(erased_artifacts, store, trail))[0]:
            raise
        raise DsmoError(
            f"run {run_id!r} is erased: its data subject was erased, so its input and outputs cannot be "
            "read and it cannot be replayed (its audit trail stays: dsmo audit verify)"
        ) from None
