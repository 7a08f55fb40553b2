"""What a run's hash-chained trail vouches for in an exported archive, beyond the manifest's sums.

The manifest's sums alone prove nothing against someone who rewrites the manifest too. These
checks hold each file to something the trail (or the file's own name) recorded:

- a stage output, to the ``outputSha256`` its STAGE_SUCCEEDED recorded (`run_archive`);
- the run's input, to the ``inputSha256`` its RUN_CREATED recorded (runs started on DSMO 2026-11
  or later; older runs recorded no hash of their input);
- a definition snapshot, to its name: a workflow version is the hash of its definition (and the
  ``effective`` parameters beside it, to the ones that definition yields);
- event values kept beside the trail, to the ``setRef.sha256`` their RUN_RESUMED recorded;
- the Temporal history, to the trail: its workflow id is the run, and (for a run's first
  generation) its start request holds the definition of the version and the input the trail recorded.

What the trail cannot vouch for is held only by the manifest: the rest of the history (its other
payloads and timestamps), dead letters, uploads and model-call records. Pinning the manifest
(its SHA-256 printed at export, kept elsewhere) covers those too.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

from dsmo.workflows.contracts.trail_io import values_digest

# Payload encodings as a history's JSON spells them (base64 of the metadata value).
JSON_PLAIN = base64.b64encode(b"json/plain").decode()
ENCRYPTED = base64.b64encode(b"binary/encrypted").decode()


def is_run_object(uri: str) -> bool:
    """A run's own stored object (not a definition snapshot it names)."""
    return any(part in uri for part in ("/artifacts/", "/dlq/", "/events/", "/uploads/"))


def object_path(run_id: str, uri: str) -> str:
    """Where an archive keeps one of a run's objects: under its key in the bucket."""
    return f"runs/{run_id}/objects/{uri.split('/', 3)[3]}"


def input_path(run_id: str, version: str) -> str:
    """Where an archive keeps a run's input (its key in the bucket: `run_input_key`)."""
    return f"runs/{run_id}/objects/artifacts/{version}/{run_id}/input.json"


def definition_version(definition: Any) -> str:
    """The workflow version of a definition as stored: the short hash of its canonical JSON."""
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def binding_problem(
    run_id: str,
    events: list[dict[str, Any]],
    read: Callable[[str], bytes],
    listed: set[str],
    unreadable: dict[str, str],
) -> str | None:
    """The first file of ``run_id`` that differs from what its trail recorded, and why; or None.

    Args:
        run_id: The run.
        events: Its trail's events (their chain already checked), RUN_CREATED first.
        read: Reads a file of the archive by its path.
        listed: The paths the manifest lists.
        unreadable: The object URIs the export could not include, and why.
    """
    created = events[0]
    data = created.get("data") or {}
    version = str(created.get("workflowVersion") or "")
    recorded = data.get("inputSha256")
    checks = (
        _input_problem(run_id, version, recorded, read, listed, unreadable),
        _definitions_problem(run_id, events, read, listed),
        _event_values_problem(run_id, events, read, listed),
        _history_problem(run_id, version, recorded, read, listed),
    )
    return next((problem for problem in checks if problem is not None), None)


def _input_problem(
    run_id: str,
    version: str,
    recorded: Any,
    read: Callable[[str], bytes],
    listed: set[str],
    unreadable: dict[str, str],
) -> str | None:
    if not isinstance(recorded, str):
        return None  # a run started before RUN_CREATED recorded its input's hash
    path = input_path(run_id, version)
    if path in listed:
        if hashlib.sha256(read(path)).hexdigest() != recorded:
            return f"{path}: differs from the input the trail recorded (RUN_CREATED inputSha256)"
        return None
    suffix = f"/artifacts/{version}/{run_id}/input.json"
    if any(uri.endswith(suffix) for uri in unreadable):
        return None
    return f"{path}: the trail recorded the run's input, but it is neither in the archive nor listed as unreadable"


def _definitions_problem(
    run_id: str, events: list[dict[str, Any]], read: Callable[[str], bytes], listed: set[str]
) -> str | None:
    folder = f"runs/{run_id}/definitions/"
    named = {str(event.get("workflowVersion")) for event in events}
    for path in sorted(p for p in listed if p.startswith(folder)):
        version = path[len(folder) :].removesuffix(".json")
        try:
            snapshot = json.loads(read(path))
        except ValueError:
            return f"{path}: not JSON"
        definition = snapshot.get("definition") if isinstance(snapshot, dict) else None
        if not isinstance(definition, dict):
            return f"{path}: holds no definition"
        if definition_version(definition) != version or snapshot.get("workflowVersion", version) != version:
            return f"{path}: its definition does not hash to version {version} (the snapshot was changed)"
        if version not in named:
            return f"{path}: version {version} is not one the trail ran"
        if "effective" in snapshot and (problem := _effective_problem(definition, snapshot["effective"])):
            return f"{path}: {problem}"
    return None


def _effective_problem(definition: dict[str, Any], effective: Any) -> str | None:
    """The ``effective`` parameters a snapshot records are derived from its definition: derive them again."""
    from dsmo.workflows.definition.model import AgentDefinition, effective_parameters

    try:
        derived = effective_parameters(AgentDefinition.model_validate(definition))
    except ValueError:
        return None  # a definition today's rules no longer admit: its hash still binds it
    if json.loads(json.dumps(derived, default=str)) != effective:
        return "its effective parameters are not the ones its definition yields (the snapshot was changed)"
    return None


def _event_values_problem(
    run_id: str, events: list[dict[str, Any]], read: Callable[[str], bytes], listed: set[str]
) -> str | None:
    for event in events:
        ref = (event.get("data") or {}).get("setRef")
        if not isinstance(ref, dict) or not is_run_object(str(ref.get("uri"))):
            continue
        path = object_path(run_id, str(ref["uri"]))
        if path in listed and hashlib.sha256(read(path)).hexdigest() != ref.get("sha256"):
            return f"{path}: differs from the event values the trail recorded (seq {event.get('seq')})"
    return None


def _history_problem(
    run_id: str, version: str, recorded: Any, read: Callable[[str], bytes], listed: set[str]
) -> str | None:
    path = f"runs/{run_id}/history.json"
    if path not in listed:
        return None
    try:
        history = json.loads(read(path))
        started = history["events"][0]["workflowExecutionStartedEventAttributes"]
    except (ValueError, KeyError, IndexError, TypeError):
        return f"{path}: not a Temporal history that starts with its run's start"
    if not isinstance(started, dict):
        return f"{path}: not a Temporal history that starts with its run's start"
    if started.get("workflowId", run_id) != run_id:
        return f"{path}: the history of run {started.get('workflowId')!r}, not of {run_id!r}"
    encoding = _start_encoding(started)
    if encoding == ENCRYPTED:
        return None  # DSMO_CODEC_KEYS: its payloads are sealed; the manifest alone vouches for them
    request = _start_request(started) if encoding == JSON_PLAIN else None
    if request is None:
        return f"{path}: its start request is not a JSON payload"
    if request.get("checkpoint") is not None:
        return None  # a later generation (continued as new, moved, rewound): it holds no first request
    if definition_version(_without_nulls(request.get("definition"))) != version:
        return f"{path}: its start request's definition is not version {version}, the one the trail recorded"
    if isinstance(recorded, str) and values_digest(request.get("input") or {}) != recorded:
        return f"{path}: its start request's input differs from the input the trail recorded"
    return None


def _start_encoding(started: dict[str, Any]) -> str | None:
    try:
        return str(started["input"]["payloads"][0]["metadata"]["encoding"])
    except (KeyError, IndexError, TypeError):
        return None


def _start_request(started: dict[str, Any]) -> dict[str, Any] | None:
    """The run's `ExecutionRequest` as JSON."""
    try:
        request = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"], validate=True))
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return request if isinstance(request, dict) else None


def _without_nulls(value: Any) -> Any:
    """A model dumped with its unset fields as null, as `exclude_none` would have dumped it."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value
