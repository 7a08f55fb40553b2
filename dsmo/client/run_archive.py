"""A run exported as one self-checking zip, and the offline check of such an archive.

Layout (``format: dsmo-run-export/1``):

- ``manifest.json``: the runs, every other file with its SHA-256 and size, and the artifacts the
  trail names that could not be exported (erased, or removed by retention);
- ``runs/{run}/trail.jsonl``: the hash-chained audit trail (the exported file, or the live trail
  chained the same way for a run that has not ended);
- ``runs/{run}/history.json``: the Temporal history, while Temporal keeps it;
- ``runs/{run}/definitions/{version}.json``: the definition snapshot of each version it ran;
- ``runs/{run}/objects/...``: every stored object of the run still readable (input, outputs,
  model call records, dead letters, large event values), in the clear, under its key;
- ``erasures.jsonl``: the erasure log's records that touch these runs.

`verify_archive` needs nothing but the file: every sum, every trail's chain, every erasure
record's own hash, and each file the trail vouches for held to what the trail recorded
(`archive_bindings`), so rewriting the manifest's sums does not hide a changed file. A changed,
added, removed or unreadable file is named.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from dsmo.activities.audit_log import line_hash, verify_lines
from dsmo.client.archive_bindings import binding_problem, is_run_object, object_path

FORMAT = "dsmo-run-export/1"
MANIFEST = "manifest.json"
ERASURES = "erasures.jsonl"


@dataclass
class ArchiveBuilder:
    """Collects an archive's files in memory, then writes the zip with its manifest."""

    run_ids: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # object URI -> why (erased, missing)

    def add(self, path: str, body: bytes) -> None:
        self.files[path] = body

    def manifest(self, exported_at: str) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "runs": self.run_ids,
            "exportedAt": exported_at,
            "files": {
                path: {"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}
                for path, body in sorted(self.files.items())
            },
            "unreadable": dict(sorted(self.unreadable.items())),
        }

    def zip_bytes(self, exported_at: str) -> tuple[bytes, str]:
        """The archive, and the SHA-256 of its manifest (keep it elsewhere to pin the archive)."""
        manifest = json.dumps(self.manifest(exported_at), indent=1, sort_keys=True).encode()
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(MANIFEST, manifest)
            for path, body in sorted(self.files.items()):
                archive.writestr(path, body)
        return buffer.getvalue(), hashlib.sha256(manifest).hexdigest()


@dataclass(frozen=True)
class ArchiveVerification:
    """What `verify_archive` found.

    Attributes:
        ok: Every file matches the manifest, every trail's chain holds, every erasure record's hash holds.
        runs: The runs the archive holds.
        files: How many files were checked.
        problem: The first problem, naming the file (or object) and what is wrong.
        unreadable: The objects the export could not include, and why.
    """

    ok: bool
    runs: list[str]
    files: int
    problem: str | None = None
    unreadable: dict[str, str] = field(default_factory=dict)


def verify_archive(data: bytes, *, manifest_sha256: str | None = None) -> ArchiveVerification:
    """Check an exported run archive offline, with no server.

    Besides every file's sum: each trail's chain, that its events are its run's, that every object
    it names is in the archive or listed as unreadable, and that each file the trail vouches for
    (stage outputs, the input, definition snapshots, event values, the history's start: see
    `archive_bindings`) is the one it recorded. With ``manifest_sha256`` (printed at export), the
    manifest itself is pinned too.

    Args:
        data: The zip's bytes (what `RunHandle.export` wrote).
        manifest_sha256: The manifest's SHA-256 as printed at export (checked if given).

    Returns:
        Whether it verifies, the runs and files it holds, and the first problem found.
        It never raises: a corrupt archive (a flipped byte, a truncated file, a forged
        manifest) gets a verdict naming the file that fails.
    """
    progress = _Progress()
    try:
        return _verify(data, manifest_sha256, progress)
    # What reading a corrupt file raises (zip, deflate, text, JSON and model checks): a verdict. Any
    # other exception is a bug of the check's own, and is not hidden as one.
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as err:
        return ArchiveVerification(
            False,
            progress.runs,
            progress.files,
            f"{progress.current}: cannot be read ({_kind(err)}: {err})",
            progress.unreadable,
        )


def _kind(err: Exception) -> str:
    """``BadZipFile``, ``zlib.error``: an error's name, with its module when the name alone says little."""
    kind = type(err)
    return kind.__name__ if kind.__module__ in ("builtins", "zipfile") else f"{kind.__module__}.{kind.__name__}"


@dataclass
class _Progress:
    """How far a check got: the file it was reading when something failed is the one named."""

    current: str = "the archive"
    runs: list[str] = field(default_factory=list)
    files: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)


def _verify(data: bytes, manifest_sha256: str | None, progress: _Progress) -> ArchiveVerification:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return ArchiveVerification(False, [], 0, "not a zip archive")
    with archive:
        names = set(archive.namelist())
        if MANIFEST not in names:
            return ArchiveVerification(False, [], 0, f"{MANIFEST} is missing")
        if len(archive.namelist()) != len(names):
            return ArchiveVerification(False, [], 0, "the archive holds a file twice")

        def read(path: str) -> bytes:
            progress.current = path
            return archive.read(path)

        manifest_bytes = read(MANIFEST)
        if manifest_sha256 is not None and hashlib.sha256(manifest_bytes).hexdigest() != manifest_sha256:
            return ArchiveVerification(False, [], 0, f"{MANIFEST}: its SHA-256 is not the one given")
        try:
            manifest = json.loads(manifest_bytes)
        except ValueError:
            return ArchiveVerification(False, [], 0, f"{MANIFEST} is not JSON")
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            return ArchiveVerification(False, [], 0, f"{MANIFEST}: not a manifest (no files listed)")
        progress.runs = runs = [str(run) for run in manifest.get("runs", [])]
        listed: dict[str, Any] = manifest["files"]
        progress.files = len(listed)
        progress.unreadable = unreadable = {
            str(uri): str(why) for uri, why in dict(manifest.get("unreadable", {})).items()
        }

        def failed(problem: str) -> ArchiveVerification:
            return ArchiveVerification(False, runs, len(listed), problem, unreadable)

        if manifest.get("format") != FORMAT:
            return failed(f"{MANIFEST}: format {manifest.get('format')!r} is not {FORMAT}")
        for extra in sorted(names - set(listed) - {MANIFEST}):
            return failed(f"{extra}: in the archive but not in the manifest")
        for path, expected in sorted(listed.items()):
            if path not in names:
                return failed(f"{path}: listed in the manifest but missing from the archive")
            body = read(path)
            if not isinstance(expected, dict) or hashlib.sha256(body).hexdigest() != expected.get("sha256"):
                return failed(f"{path}: its SHA-256 does not match the manifest (the object was changed)")
            if PurePosixPath(path).name == "trail.jsonl":
                chain = verify_lines(body)
                if not chain.ok:
                    return failed(f"{path}: {chain.problem}")
            if path == ERASURES and (problem := _erasure_problem(body)) is not None:
                return failed(f"{path}: {problem}")
        for run_id in runs:
            trail = f"runs/{run_id}/trail.jsonl"
            if trail not in listed:
                return failed(f"{trail}: the run's trail is missing")
            problem = _trail_problem(run_id, read(trail), read, set(listed), unreadable)
            if problem is not None:
                return failed(problem)
    return ArchiveVerification(True, runs, len(listed), None, unreadable)


def _trail_problem(
    run_id: str, body: bytes, read: Callable[[str], bytes], listed: set[str], unreadable: dict[str, str]
) -> str | None:
    """What is wrong between a run's trail and the objects beside it, or None."""
    events = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    if not events or not all(isinstance(event, dict) for event in events) or events[0].get("type") != "RUN_CREATED":
        return f"runs/{run_id}/trail.jsonl: does not start with the run's RUN_CREATED"
    for event in events:
        if event.get("runId") != run_id:
            return f"runs/{run_id}/trail.jsonl: event {event.get('seq')} is run {event.get('runId')!r}'s"
        uris = event.get("artifactUris") or []
        if not isinstance(uris, list):
            return f"runs/{run_id}/trail.jsonl: event {event.get('seq')} names its objects wrongly"
        for uri in uris:
            path = object_path(run_id, str(uri))
            if not is_run_object(str(uri)) or path in listed or uri in unreadable:
                continue
            return f"{path}: the trail names it, but it is neither in the archive nor listed as unreadable"
        recorded = (event.get("data") or {}).get("outputSha256")
        if event.get("type") == "STAGE_SUCCEEDED" and recorded and uris:
            path = object_path(run_id, str(uris[0]))
            if path in listed and hashlib.sha256(read(path)).hexdigest() != recorded:
                return f"{path}: differs from the output the trail recorded (seq {event.get('seq')})"
    return binding_problem(run_id, events, read, listed, unreadable)


def _erasure_problem(body: bytes) -> str | None:
    """Each erasure record's own hash (they are a subset of the log: their links are not checked)."""
    for number, line in enumerate(body.decode(errors="replace").splitlines(), start=1):
        try:
            record = json.loads(line)
        except ValueError:
            return f"record {number}: not JSON"
        if not isinstance(record, dict):
            return f"record {number}: not an erasure record"
        claimed, previous = record.pop("hash", None), record.pop("prevHash", "")
        if line_hash(previous, record) != claimed:
            return f"record {number}: hash does not match its content"
    return None
