"""What a run starts from: its input artifact and its version's immutable config snapshot.

Written once each. A DSMO starter (`DsmoClient.start`) prepares the run before starting it and
passes the result in the request; the workflow prepares it itself (a local activity) only when a
starter did not, for instance a run started with the `temporal` CLI or as a child.
"""

from __future__ import annotations

import hashlib
import threading

from activities.artifacts import ArtifactStore, encode_json, run_input_key
from activities.definitions import config_key
from activities.errors import ContractViolation
from workflows.contracts import PreparedRun, PrepareRun


class RunPreparer:
    def __init__(self, store: ArtifactStore) -> None:
        self.store = store
        # Config snapshots this process has written or checked: they are write-once, so a
        # version's snapshot is confirmed once per process instead of once per run.
        self._confirmed_configs: dict[str, str] = {}
        self._lock = threading.Lock()

    def prepare(self, request: PrepareRun) -> PreparedRun:
        input_uri = self.store.put_json_once(run_input_key(request.workflow_version, request.run_id), request.input).uri
        with self._lock:
            config_ref = self._confirmed_configs.get(request.workflow_version)
        if config_ref is None:
            config_ref = self._snapshot_config(request)
            with self._lock:
                self._confirmed_configs[request.workflow_version] = config_ref
        return PreparedRun(input_uri=input_uri, config_ref=config_ref)

    def _snapshot_config(self, request: PrepareRun) -> str:
        snapshot = {
            "workflowVersion": request.workflow_version,
            "definition": request.definition,
            "effective": request.effective,
        }
        body = encode_json(snapshot)
        config = self.store.put_json_bytes_once(config_key(request.workflow_version), body)
        if not config.created and config.sha256 != hashlib.sha256(body).hexdigest():
            existing = self.store.read_json(config.uri)
            if existing.get("definition") != request.definition:
                raise ContractViolation(f"config snapshot {config.uri} holds another definition for this version")
        return config.uri
