"""What a run starts from: its input artifact and its version's immutable config snapshot.

Written once each. A DSMO starter (`DsmoClient.start`) prepares the run before starting it and
passes the result in the request; the workflow prepares it itself (a local activity) only when a
starter did not, for instance a run started with the `temporal` CLI or as a child.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dsmo.activities.artifacts import ArtifactErased, ArtifactStore, StoredArtifact, encode_json, run_input_key
from dsmo.activities.definition_store import config_key
from dsmo.activities.plugin_errors import ContractViolation
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.activity_io import PreparedRun, PrepareRun
from dsmo.workflows.contracts.subject_io import SubjectSeal


class LeftoverInput(DsmoError):
    """The run's input key holds another document: an earlier start of this run id failed after
    writing its input. Its run never existed, so the new start may replace it."""

    code = "input_conflict"


class RunPreparer:
    def __init__(self, store: ArtifactStore) -> None:
        self.store = store
        # Config snapshots this process has written or checked: they are write-once, so a
        # version's snapshot is confirmed once per process instead of once per run.
        self._confirmed_configs: dict[str, str] = {}
        self._lock = threading.Lock()
        # One thread writes a new version's snapshot while the others wait for it: SeaweedFS
        # queues conditional PUTs to one key behind a lock retried about once a second, so a
        # burst of first starts racing on the key waited seconds (16 at once: up to 2 s).
        self._snapshot_lock = threading.Lock()

    def prepare(self, request: PrepareRun) -> PreparedRun:
        """The local activity's way in: everything comes in the request. It runs inside the
        run that owns the id (ids are never reused), so another input there is a leftover."""
        return self.prepare_run(
            request.run_id,
            request.workflow_version,
            request.input,
            lambda: (request.definition, request.effective),
            replace_leftover=True,
            seal=request.seal,
        )

    def prepare_run(
        self,
        run_id: str,
        workflow_version: str,
        run_input: dict[str, Any],
        config: Callable[[], tuple[dict[str, Any], dict[str, Any]]],
        *,
        replace_leftover: bool = False,
        seal: SubjectSeal | None = None,
    ) -> PreparedRun:
        """``config`` gives (definition, effective parameters); it is called only for a version
        this process has not confirmed yet, so most runs skip serializing their definition.

        The input is written once; the same input again (a retried start) is accepted. Another
        input under the key raises LeftoverInput, unless ``replace_leftover`` (the caller knows
        no run of this id has started) says to write this one over it. With a ``seal`` (the run's
        data subject) the input is stored sealed with the subject's key.
        """
        key = run_input_key(workflow_version, run_id)
        body = encode_json(run_input)
        try:
            stored = self.store.put_json_bytes_once(key, body, seal=seal)
            leftover = not stored.matches
        except ArtifactErased:  # an earlier start's input, sealed with an erased subject's key
            stored, leftover = StoredArtifact(self.store.uri(key), "", 0, created=False, matches=False), True
        if leftover:
            if not replace_leftover:
                raise LeftoverInput(f"run {run_id}: {stored.uri} holds the input of an earlier start of this id")
            self.store.put_json_bytes(key, body, seal=seal)
        input_uri = stored.uri
        with self._lock:
            config_ref = self._confirmed_configs.get(workflow_version)
        if config_ref is None:
            config_ref = self._confirm_config(workflow_version, config)
        return PreparedRun(input_uri=input_uri, config_ref=config_ref)

    def _confirm_config(
        self, workflow_version: str, config: Callable[[], tuple[dict[str, Any], dict[str, Any]]]
    ) -> str:
        with self._snapshot_lock:
            with self._lock:
                config_ref = self._confirmed_configs.get(workflow_version)
            if config_ref is None:  # not confirmed by a thread this one waited behind
                definition, effective = config()
                config_ref = self._snapshot_config(workflow_version, definition, effective)
                with self._lock:
                    self._confirmed_configs[workflow_version] = config_ref
        return config_ref

    def _snapshot_config(self, workflow_version: str, definition: dict[str, Any], effective: dict[str, Any]) -> str:
        snapshot = {"workflowVersion": workflow_version, "definition": definition, "effective": effective}
        body = encode_json(snapshot)
        config = self.store.put_json_bytes_once(config_key(workflow_version), body)
        if not config.matches:
            existing = self.store.read_json(config.uri)
            if existing.get("definition") != definition:
                raise ContractViolation(f"config snapshot {config.uri} holds another definition for this version")
        return config.uri
