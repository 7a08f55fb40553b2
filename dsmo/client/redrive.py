"""Dead letters (`dlq/{run_id}/{stage}.json`): list them and redrive one as a new linked run.

A replay or what-if writes no dead letter. One written by a DSMO that still did (a letter whose
run was started as a replay: ``replayOf`` in its origin) is neither listed nor redriven: a
redrive is a live run, and would act (send messages, run saga actions, start a version never
published) for a run that only re-read the record.

Longer than most modules: listing, reading and redriving a letter share the rules of what a
letter is and which run redrove it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError
from pydantic import ValidationError
from temporalio.service import RPCError, RPCStatusCode

from dsmo.activities.artifacts import ArtifactErased, ArtifactMissing, ArtifactStore
from dsmo.activities.audit_log import audit_key, segment_key
from dsmo.client import run_status, starts
from dsmo.client.client_errors import RunAlreadyExists, RunNotFound
from dsmo.client.connection import first_line
from dsmo.client.core import ClientCore
from dsmo.client.replay import load_snapshot
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import InvalidRunId, check_run_id
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import DeadLetter
from dsmo.workflows.contracts.run_records import ExecutionRequest


@dataclass(frozen=True)
class DeadLetterRow:
    """A dead letter as `DsmoClient.dead_letters` lists it.

    Attributes:
        id: ``RUN/STAGE``, what `DsmoClient.redrive` takes.
        run_id: The run whose stage could not succeed.
        stage: That stage.
        error_type: The last error's type.
        attempts: How many attempts were made.
        created_at: When it was dead-lettered (ISO 8601).
        redriven_as: The run that redrove it, if one did.
    """

    id: str  # {run_id}/{stage}
    run_id: str
    stage: str
    error_type: str
    attempts: int
    created_at: str
    redriven_as: str | None


def _marker(letter_id: str) -> str:
    return f"dlq/{letter_id}.redrive.json"


# How much of a trail is read to find its first event (RUN_CREATED, a few hundred bytes).
FIRST_EVENT_BYTES = 64 * 1024


class ReplayLetterRefused(DsmoError):
    """The dead letter was left by a replay or what-if run: it is never redriven."""


class AlreadyRedriven(DsmoError):
    """The dead letter was redriven already: a second redrive would start a second live run."""


def replay_origin(store: ArtifactStore, run_id: str) -> str | None:
    """The run ``run_id`` replays, as its trail in the store records it (``replayOf``), else None.

    None as well when the store holds no trail of it yet (a run still running, or whose export
    failed): `redrive` then asks Temporal.
    """
    origin = trail_origin(store, run_id)
    return str(origin["replayOf"]) if origin and origin.get("replayOf") else None


def trail_origin(store: ArtifactStore, run_id: str) -> dict[str, Any] | None:
    """Where ``run_id`` came from as its trail's ``RUN_CREATED`` records it (``replayOf``,
    ``redriveOf``...: empty for a run started afresh); None when the store holds no trail of it."""
    for key in (audit_key(run_id), segment_key(run_id, 1)):
        first = _first_event(store, key)
        if first is not None:
            data = first.get("data") if first.get("type") == "RUN_CREATED" else None
            return data if isinstance(data, dict) else {}
    return None


def _first_event(store: ArtifactStore, key: str) -> dict[str, Any] | None:
    try:
        head = store.s3.get_object(Bucket=store.bucket, Key=key, Range=f"bytes=0-{FIRST_EVENT_BYTES - 1}")
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound", "InvalidRange"):
            return None
        raise
    line = head["Body"].read().split(b"\n", 1)[0]
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


async def _started_as_replay(core: ClientCore, run_id: str) -> str | None:
    """The run ``run_id`` replays, from the request Temporal started it with (None: not a replay, or gone)."""
    try:
        origin = await _started_origin(core, run_id)
    except RPCError as err:
        # Not knowing is not "no": a replay's letter must never be redriven for want of an answer.
        raise DsmoError(
            f"run {run_id}: cannot tell whether it was a replay ({first_line(err)}); nothing was redriven"
        ) from None
    replayed = (origin or {}).get("replayOf")
    return str(replayed) if replayed else None


async def _started_origin(core: ClientCore, run_id: str) -> dict[str, Any] | None:
    """The ``origin`` of the request Temporal started ``run_id`` with (None: Temporal has no such run).

    Raises:
        RPCError: Temporal could not answer.
    """
    handle = core.temporal.get_workflow_handle(run_id)
    try:
        async for event in handle.fetch_history_events():
            started = event.workflow_execution_started_event_attributes
            if not started.input.payloads:
                return {}
            (request,) = await core.temporal.data_converter.decode(started.input.payloads[:1], [dict])
            origin = request.get("origin") if isinstance(request, dict) else None
            return origin if isinstance(origin, dict) else {}
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None  # its history is gone: its trail in the store was the only witness
        raise
    return None


async def _redrive_of(core: ClientCore, store: ArtifactStore, run_id: str) -> str | None:
    """The run whose letter ``run_id`` redrove, from Temporal's record or else its trail.

    Raises:
        DsmoError: Temporal could not answer and the store keeps no trail of the run.
    """
    unanswered: RPCError | None = None
    try:
        origin = await _started_origin(core, run_id)
    except RPCError as err:
        origin, unanswered = None, err
    if origin is None:
        origin = await asyncio.to_thread(trail_origin, store, run_id)
    if origin is None and unanswered is not None:
        raise DsmoError(
            f"run {run_id}: cannot tell whether it is a redrive ({first_line(unanswered)}); nothing was redriven"
        ) from None
    redriven = (origin or {}).get("redriveOf")
    return str(redriven) if redriven else None


def list_dead_letters(store: ArtifactStore, run_id: str | None = None) -> list[DeadLetterRow]:
    """The dead letters, oldest first; those a replay or what-if left are not listed (never redriven)."""
    rows = []
    replays: dict[str, str | None] = {}  # run -> the run it replays: one trail read per run
    for uri in store.list_uris(f"dlq/{run_id}/" if run_id else "dlq/"):
        if uri.endswith(".redrive.json") or not uri.endswith(".json"):
            continue
        try:
            letter = DeadLetter.model_validate(store.read_json(uri))
        except ArtifactErased:
            continue  # its run's data subject was erased: nothing is left to redrive
        except ArtifactMissing:
            continue  # removed by retention since it was listed
        if letter.run_id not in replays:
            replays[letter.run_id] = replay_origin(store, letter.run_id)
        if replays[letter.run_id] is not None:
            continue  # left by a replay: nothing in it may act
        letter_id = f"{letter.run_id}/{letter.stage}"
        redriven = _redriven_as(store, letter_id)
        rows.append(
            DeadLetterRow(
                letter_id,
                letter.run_id,
                letter.stage,
                letter.error_type,
                letter.attempts,
                letter.created_at.isoformat(timespec="seconds"),
                redriven,
            )
        )
    return sorted(rows, key=lambda row: row.created_at)


def read_dead_letter(store: ArtifactStore, letter_id: str) -> DeadLetter:
    """The dead letter ``RUN/STAGE``.

    Raises:
        DsmoError: ``letter_id`` is not a letter's id, or no such letter is stored.
    """
    run_id, slash, stage = letter_id.partition("/")
    # A stage's name never ends as a redrive's marker does (`dlq/RUN/STAGE.redrive.json`).
    if not slash or not stage or "/" in stage or stage in (".", "..") or stage.endswith(".redrive"):
        raise DsmoError(f"dead letter {letter_id!r}: not RUN/STAGE (see `dsmo dlq list`)")
    try:
        check_run_id(run_id)  # it becomes part of an object key
    except InvalidRunId as err:
        raise DsmoError(f"dead letter {letter_id!r}: {err}") from None
    try:
        return DeadLetter.model_validate(store.read_json(store.uri(f"dlq/{letter_id}.json")))
    except ArtifactMissing:
        raise DsmoError(f"dead letter {letter_id!r} not found (see `dsmo dlq list`)") from None
    except ValidationError:
        raise DsmoError(f"dead letter {letter_id!r}: its object is not a dead letter") from None


async def _ended_without_success(core: ClientCore, run_id: str) -> bool:
    """Whether the run ended failed, timed out or cancelled (or Temporal no longer has it)."""
    try:
        view = await run_status.status(core, run_id)
    except RunNotFound:
        return True
    return view.status in (RunStatus.FAILED, RunStatus.TIMEOUT, RunStatus.CANCELLED)


def _redriven_as(store: ArtifactStore, letter_id: str) -> str | None:
    """The run that redrove the letter, as its marker says (None: not redriven)."""
    try:
        return str(store.read_json(store.uri(_marker(letter_id))).get("runId"))
    except ArtifactMissing:
        return None


async def redrive(
    core: ClientCore, store: ArtifactStore, letter_id: str, *, task_queue: str | None = None, new_id: str | None = None
) -> str:
    """Reprocess from the failed stage: same definition version, config and variables.

    With ``new_id``, a redrive of the letter's run that exists already under that id is the one
    an interrupted attempt started before it could mark the letter: it is marked now and no
    second run is started.

    Raises:
        ReplayLetterRefused: The letter's run is a replay or what-if: nothing is started.
        AlreadyRedriven: The letter was redriven already, as another run than ``new_id`` that
            is running or completed (a redrive that failed or was cancelled may be redriven again).
        RunAlreadyExists: ``new_id`` is taken by a run that is not a redrive of the letter's run
            (or kept by its trail): nothing is started or marked.
        DsmoError: Whether the run under ``new_id`` is such a redrive cannot be told now.
    """
    letter = read_dead_letter(store, letter_id)
    marked = _redriven_as(store, letter_id)
    if marked is not None:
        if marked == new_id:  # the same redrive asked again: done already
            return marked
        if not await _ended_without_success(core, marked):
            raise AlreadyRedriven(
                f"dead letter {letter_id} was redriven already, as run {marked}, which has not failed; "
                "nothing was started"
            )
    replayed = replay_origin(store, letter.run_id) or await _started_as_replay(core, letter.run_id)
    if replayed is not None:
        raise ReplayLetterRefused(
            f"dead letter {letter_id}: run {letter.run_id} is a replay of {replayed}; a replay's dead letter is "
            "never redriven (a redrive is a live run and would act for it); redrive the original's letter instead"
        )
    definition = await load_snapshot(store, letter.config_ref)
    if definition.workflow_version != letter.workflow_version:
        raise DsmoError(f"dead letter {letter_id}: its config snapshot is of another version")
    request = ExecutionRequest(
        definition=definition,
        input=letter.variables,
        correlation_id=letter.correlation_id,
        start_at=letter.stage,
        origin={"redriveOf": letter.run_id},
    )
    run_id = new_id or f"{letter.run_id}.redrive-{uuid.uuid4().hex[:8]}"
    try:
        await starts.start_request(core, request, run_id=run_id, task_queue=task_queue or letter.task_queue)
    except RunAlreadyExists:
        if new_id is None:
            raise
        # Only a redrive of this letter's run is an earlier attempt's: any other run keeps its id.
        if await _redrive_of(core, store, run_id) != letter.run_id:
            raise RunAlreadyExists(
                f"run id {run_id!r} is taken by a run that is not a redrive of {letter.run_id}; nothing was redriven"
            ) from None
    store.s3.put_object(
        Bucket=store.bucket,
        Key=_marker(letter_id),
        Body=f'{{"runId": "{run_id}"}}'.encode(),
        ContentType="application/json",
    )
    return run_id


async def dead_letters(core: ClientCore, *, run_id: str | None = None) -> list[DeadLetterRow]:
    """The dead letters (stages that could not succeed), oldest first, with what redrove each.

    Args:
        core: The client's core.
        run_id: Only this run's (default: every run's).

    Returns:
        One row per dead letter: its id (``RUN/STAGE``), error type, attempts, when, and the
        run that redrove it, if any.

    Raises:
        botocore.exceptions.BotoCoreError: The object store cannot be reached.
    """
    if run_id is not None:
        check_run_id(run_id)  # it becomes part of an object key prefix
    return await asyncio.to_thread(list_dead_letters, core.artifacts, run_id)
