"""The offline check of an exported run archive: what the trail vouches for, and corrupt archives.

The archives here are built the way `run_export` builds them (`ArchiveBuilder`, a chained trail,
a config snapshot, a Temporal-shaped history); a tampered file is put back with a manifest whose
sums are rewritten to match, so only what the trail recorded can catch it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from typing import Any

import pytest

from dsmo.activities.artifacts import encode_json
from dsmo.activities.audit_log import chain
from dsmo.client.run_archive import ArchiveBuilder, verify_archive
from dsmo.workflows.definition.model import AgentDefinition, effective_parameters, parse_definition

RUN = "archive-test-1a2b3c4d5e6f"
DEFINITION = parse_definition(
    {
        "agent": "archive-test",
        "version": "1",
        "start": "review",
        "nodes": {
            "review": {"actionType": "run_agent", "agent": "copy", "next": "done"},
            "done": {"actionType": "send_message", "parameters": {"to": "x", "message": "thanks"}},
        },
    }
)
VERSION = DEFINITION.workflow_version
INPUT = {"who": "alice", "amount": 12.5}
OUTPUT = encode_json({"copied": INPUT})
INPUT_PATH = f"runs/{RUN}/objects/artifacts/{VERSION}/{RUN}/input.json"
OUTPUT_PATH = f"runs/{RUN}/objects/artifacts/{VERSION}/{RUN}/review/attempt=1/output.json"
SNAPSHOT_PATH = f"runs/{RUN}/definitions/{VERSION}.json"
HISTORY_PATH = f"runs/{RUN}/history.json"
BUCKET = "s3://dsmo-artifacts/"


def _event(seq: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "seq": seq,
        "type": kind,
        "runId": RUN,
        "at": "2026-11-28T20:54:26.056183Z",
        "stage": fields.pop("stage", None),
        "attempt": None,
        "workflowVersion": VERSION,
        "agentVersion": None,
        "artifactUris": fields.pop("artifactUris", []),
        "data": fields.pop("data", {}),
    }


def trail(input_sha256: str | None = hashlib.sha256(encode_json(INPUT)).hexdigest()) -> bytes:
    created = {"agent": "archive-test", "version": "1", **({"inputSha256": input_sha256} if input_sha256 else {})}
    output_uri = BUCKET + OUTPUT_PATH.split("/objects/", 1)[1]
    return chain(
        [
            _event(1, "RUN_CREATED", data=created),
            _event(2, "STAGE_STARTED", stage="review", artifactUris=[BUCKET + INPUT_PATH.split("/objects/", 1)[1]]),
            _event(
                3,
                "STAGE_SUCCEEDED",
                stage="review",
                artifactUris=[output_uri],
                data={"outputSha256": hashlib.sha256(OUTPUT).hexdigest()},
            ),
            _event(4, "RUN_COMPLETED", data={"status": "completed", "resultType": "success"}),
        ]
    )


def snapshot(definition: AgentDefinition = DEFINITION) -> dict[str, Any]:
    # As preparation.py writes it (not by_alias: the model serializes by alias).
    return {
        "workflowVersion": VERSION,
        "definition": definition.model_dump(mode="json", exclude_none=True),
        "effective": json.loads(json.dumps(effective_parameters(definition))),
    }


def history(request_input: dict[str, Any] = INPUT, workflow_id: str = RUN) -> dict[str, Any]:
    # As Temporal's JSON holds it: the request dumped with its unset fields as null.
    request = {"definition": DEFINITION.model_dump(mode="json"), "input": request_input, "checkpoint": None}
    payload = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()}}
    payload["data"] = base64.b64encode(json.dumps(request).encode()).decode()  # type: ignore[assignment]
    started = {"workflowId": workflow_id, "input": {"payloads": [payload]}}
    return {"events": [{"eventId": "1", "workflowExecutionStartedEventAttributes": started}]}


def files(**changes: bytes) -> dict[str, bytes]:
    found = {
        f"runs/{RUN}/trail.jsonl": trail(),
        INPUT_PATH: encode_json(INPUT),
        OUTPUT_PATH: OUTPUT,
        SNAPSHOT_PATH: encode_json(snapshot()),
        HISTORY_PATH: json.dumps(history()).encode(),
    }
    return {**found, **{path: body for path, body in changes.items()}}


def archive(contents: dict[str, bytes]) -> bytes:
    """The archive of these files, with a manifest whose sums match them (as a forger would write)."""
    builder = ArchiveBuilder([RUN])
    for path, body in contents.items():
        builder.add(path, body)
    return builder.zip_bytes("2026-11-28T21:00:00+00:00")[0]


def test_an_untouched_archive_verifies() -> None:
    verdict = verify_archive(archive(files()))
    assert verdict.ok, verdict.problem


def test_the_snapshot_s_definition_hashes_to_its_version() -> None:
    # What archive_bindings relies on: the stored snapshot's definition is the version's hash input.
    from dsmo.client.archive_bindings import definition_version

    assert definition_version(snapshot()["definition"]) == VERSION


def _changed_input() -> dict[str, bytes]:
    return {INPUT_PATH: encode_json({**INPUT, "who": "mallory"})}


def _changed_definition() -> dict[str, bytes]:
    forged = snapshot()
    forged["definition"]["nodes"]["done"]["parameters"]["message"] = "wire the money"
    return {SNAPSHOT_PATH: encode_json(forged)}


def _changed_effective() -> dict[str, bytes]:
    forged = snapshot()
    forged["effective"]["nodes"]["review"]["retry"]["maxAttempts"] = 99
    return {SNAPSHOT_PATH: encode_json(forged)}


def _changed_history_input() -> dict[str, bytes]:
    return {HISTORY_PATH: json.dumps(history({**INPUT, "who": "mallory"})).encode()}


def _other_run_s_history() -> dict[str, bytes]:
    return {HISTORY_PATH: json.dumps(history(workflow_id="someone-else-000000000000")).encode()}


@pytest.mark.parametrize(
    ("tamper", "named", "why"),
    [
        (_changed_input, INPUT_PATH, "differs from the input the trail recorded"),
        (_changed_definition, SNAPSHOT_PATH, f"its definition does not hash to version {VERSION}"),
        (_changed_effective, SNAPSHOT_PATH, "its effective parameters are not the ones its definition yields"),
        (_changed_history_input, HISTORY_PATH, "its start request's input differs from the input the trail recorded"),
        (_other_run_s_history, HISTORY_PATH, "the history of run 'someone-else-000000000000'"),
    ],
    ids=["input", "definition", "effective", "history-input", "history-of-another-run"],
)
def test_a_changed_file_with_a_rewritten_manifest_is_refused_naming_it(tamper: Any, named: str, why: str) -> None:
    verdict = verify_archive(archive(files(**tamper())))
    assert not verdict.ok
    assert verdict.problem is not None and verdict.problem.startswith(f"{named}: {why}"), verdict.problem


def test_a_removed_input_the_trail_vouches_for_must_be_listed_as_unreadable() -> None:
    contents = files()
    del contents[INPUT_PATH]
    verdict = verify_archive(archive(contents))
    assert verdict.problem is not None and verdict.problem.startswith(f"{INPUT_PATH}: the trail")


def test_a_run_that_recorded_no_input_hash_still_verifies_by_the_manifest() -> None:
    # Runs started before RUN_CREATED recorded inputSha256: their input is held by the manifest alone.
    contents = files(**{f"runs/{RUN}/trail.jsonl": trail(input_sha256=None)}, **_changed_input())
    assert verify_archive(archive(contents)).ok


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as opened:
        return {name: opened.read(name) for name in opened.namelist()}


def flipped_verdicts(data: bytes, every: int) -> int:
    """Flip every ``every``-th byte, one archive per flip; asserts each gets a verdict, and no `ok`
    for an archive whose content changed. Returns how many flips were tried."""
    original = _members(data)
    tried = 0
    for offset in range(0, len(data), every):
        corrupt = bytearray(data)
        corrupt[offset] ^= 0xFF
        verdict = verify_archive(bytes(corrupt))  # must not raise
        tried += 1
        if verdict.ok:
            assert _members(bytes(corrupt)) == original, f"byte {offset}: ok with changed content"
        else:
            assert verdict.problem, f"byte {offset}: refused without saying why"
    return tried


def test_every_corrupt_archive_gets_a_verdict_never_an_exception() -> None:
    data = archive(files())
    assert flipped_verdicts(data, every=3) > 1000


def test_a_verdict_names_the_member_that_cannot_be_read() -> None:
    data = bytearray(archive(files()))
    start = data.index(INPUT_PATH.encode())  # the input's local header, then its compressed bytes
    data[start + len(INPUT_PATH) + 2] ^= 0xFF
    verdict = verify_archive(bytes(data))
    assert not verdict.ok and verdict.problem is not None and verdict.problem.startswith(INPUT_PATH), verdict.problem


@pytest.mark.parametrize(
    "manifest",
    [b"[]", b'{"format": "dsmo-run-export/1", "files": []}', b'{"format": "dsmo-run-export/1", "files": {"x": 1}}'],
)
def test_a_manifest_of_the_wrong_shape_gets_a_verdict(manifest: bytes) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as written:
        written.writestr("manifest.json", manifest)
        written.writestr("x", b"")
    verdict = verify_archive(buffer.getvalue())
    assert not verdict.ok and verdict.problem
