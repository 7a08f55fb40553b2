"""Dead letters (`dlq/{run_id}/{stage}.json`): list them and redrive one as a new linked run."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsmo.activities.artifacts import ArtifactErased, ArtifactMissing, ArtifactStore
from dsmo.starter.client.client_errors import RunAlreadyExists
from dsmo.starter.client.replay import load_snapshot
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.activity_io import DeadLetter
from dsmo.workflows.contracts.run_records import ExecutionRequest

if TYPE_CHECKING:  # the client calls this module; it names the client only in annotations
    from dsmo.starter.client.dsmo_client import DsmoClient


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


def list_dead_letters(store: ArtifactStore, run_id: str | None = None) -> list[DeadLetterRow]:
    rows = []
    for uri in store.list_uris(f"dlq/{run_id}/" if run_id else "dlq/"):
        if uri.endswith(".redrive.json") or not uri.endswith(".json"):
            continue
        try:
            letter = DeadLetter.model_validate(store.read_json(uri))
        except ArtifactErased:
            continue  # its run's data subject was erased: nothing is left to redrive
        except ArtifactMissing:
            continue  # removed by retention since it was listed
        letter_id = f"{letter.run_id}/{letter.stage}"
        try:
            redriven = str(store.read_json(store.uri(_marker(letter_id))).get("runId"))
        except ArtifactMissing:
            redriven = None
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
    try:
        return DeadLetter.model_validate(store.read_json(store.uri(f"dlq/{letter_id}.json")))
    except ArtifactMissing:
        raise DsmoError(f"dead letter {letter_id!r} not found (see `dsmo dlq list`)") from None


async def redrive(
    dsmo: DsmoClient, store: ArtifactStore, letter_id: str, *, task_queue: str | None = None, new_id: str | None = None
) -> str:
    """Reprocess from the failed stage: same definition version, config and variables.

    With ``new_id``, a run of that id that exists already is the redrive an interrupted attempt
    started before it could mark the letter: it is marked now and no second run is started.
    """
    letter = read_dead_letter(store, letter_id)
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
        await dsmo.start_request(request, run_id=run_id, task_queue=task_queue or letter.task_queue)
    except RunAlreadyExists:
        if new_id is None:
            raise
    store.s3.put_object(
        Bucket=store.bucket,
        Key=_marker(letter_id),
        Body=f'{{"runId": "{run_id}"}}'.encode(),
        ContentType="application/json",
    )
    return run_id
