"""One typed view of the configuration every DSMO process reads, grouped by concern.

`Settings.from_env()` reads the environment once; each group (`settings.temporal`,
`settings.store`, ...) is a frozen dataclass in its own module that reads and checks its own
variables. Temporal and the AWS SDK keep their own variable names (``TEMPORAL_ADDRESS``,
``AWS_ENDPOINT_URL_S3``, ...) so the official tools read the same environment; everything else
is ``DSMO_*``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dsmo.config.codec_settings import CodecSettings
from dsmo.config.env_values import SettingsError
from dsmo.config.ingress_settings import IngressSettings
from dsmo.config.llm_settings import LlmSettings
from dsmo.config.messaging_settings import MessagingSettings
from dsmo.config.store_settings import StoreSettings
from dsmo.config.temporal_settings import DEFAULT_TASK_QUEUE, TemporalSettings
from dsmo.config.worker_settings import WorkerSettings, workflow_sandbox_from

__all__ = ["DEFAULT_TASK_QUEUE", "ENVIRONMENT", "Settings", "SettingsError", "workflow_sandbox_from"]

_STATE_DIR = {"DSMO_STATE_DIR": ".dsmo"}

# Every environment variable a DSMO process reads, with its default. docker-compose.yml is
# checked against this table by a test, so the production-like stack uses the same names.
ENVIRONMENT: dict[str, str] = {
    **TemporalSettings.VARIABLES,
    **StoreSettings.VARIABLES,
    **WorkerSettings.VARIABLES,
    **IngressSettings.VARIABLES,
    **MessagingSettings.VARIABLES,
    **LlmSettings.VARIABLES,
    **CodecSettings.VARIABLES,
    **_STATE_DIR,
}


@dataclass(frozen=True)
class Settings:
    """Where the Temporal server, the object store and the local state live, and how DSMO behaves.

    Build it with `Settings.from_env()`. Each group reads the variables its docstring lists
    (the stack page lists the defaults); `state_dir` is the one value they share, the folder
    the paths that are not given default under.

    Attributes:
        temporal: Temporal's address, namespace, TLS, task queue and Web UI.
        store: The object store, its credentials and bucket.
        worker: A worker's plugins, concurrency, sandbox and metrics.
        ingress: The ingress and console: where they listen, API keys, rates.
        messaging: The default channel, the outbox, the webhook.
        llm: The model endpoint of `llm` nodes.
        codec: Payload encryption keys.
        state_dir: Local state: the embedded stack's data, pid files, the key file [``DSMO_STATE_DIR``].
    """

    temporal: TemporalSettings = field(default_factory=TemporalSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    ingress: IngressSettings = field(default_factory=IngressSettings)
    messaging: MessagingSettings = field(default_factory=MessagingSettings)
    llm: LlmSettings = field(default_factory=LlmSettings)
    codec: CodecSettings = field(default_factory=CodecSettings)
    state_dir: Path = field(default_factory=lambda: Path(_STATE_DIR["DSMO_STATE_DIR"]).resolve())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from the environment, validating each value.

        Args:
            env: The variables to read (default: ``os.environ``); a missing one takes its default.

        Returns:
            The settings.

        Raises:
            SettingsError: A value is invalid; the message names the variable.
        """
        source = os.environ if env is None else env
        return cls(
            temporal=TemporalSettings.from_env(source),
            store=StoreSettings.from_env(source),
            worker=WorkerSettings.from_env(source),
            ingress=IngressSettings.from_env(source),
            messaging=MessagingSettings.from_env(source),
            llm=LlmSettings.from_env(source),
            codec=CodecSettings.from_env(source),
            state_dir=Path(source.get("DSMO_STATE_DIR") or _STATE_DIR["DSMO_STATE_DIR"]).expanduser().resolve(),
        )

    def with_changes(
        self,
        *,
        temporal: TemporalSettings | Mapping[str, Any] | None = None,
        store: StoreSettings | Mapping[str, Any] | None = None,
        worker: WorkerSettings | Mapping[str, Any] | None = None,
        ingress: IngressSettings | Mapping[str, Any] | None = None,
        messaging: MessagingSettings | Mapping[str, Any] | None = None,
        llm: LlmSettings | Mapping[str, Any] | None = None,
        codec: CodecSettings | Mapping[str, Any] | None = None,
        state_dir: Path | None = None,
    ) -> Settings:
        """A copy with some values changed.

        Args:
            temporal: A whole group, or a mapping of some of its fields to new values
                (``temporal={"task_queue": "q"}``, the rest of the group kept); likewise
                ``store``, ``worker``, ``ingress``, ``messaging``, ``llm`` and ``codec``.
            store: See ``temporal``.
            worker: See ``temporal``.
            ingress: See ``temporal``.
            messaging: See ``temporal``.
            llm: See ``temporal``.
            codec: See ``temporal``.
            state_dir: The new state folder.

        Returns:
            The new settings; these are unchanged.

        Raises:
            TypeError: A mapping names a field its group does not have.
        """
        asked = {
            "temporal": temporal,
            "store": store,
            "worker": worker,
            "ingress": ingress,
            "messaging": messaging,
            "llm": llm,
            "codec": codec,
        }
        changes: dict[str, Any] = {
            name: replace(getattr(self, name), **value) if isinstance(value, Mapping) else value
            for name, value in asked.items()
            if value is not None
        }
        if state_dir is not None:
            changes["state_dir"] = state_dir
        return replace(self, **changes)

    def to_env(self) -> dict[str, str]:
        """The environment that makes another process (worker, CLI, `temporal`) see these settings.

        Returns:
            Variable names and values, every one a `from_env` reads (the TLS ones only when set).
        """
        return {
            **self.temporal.to_env(),
            **self.store.to_env(),
            **self.worker.to_env(),
            **self.ingress.to_env(),
            **self.messaging.to_env(),
            **self.llm.to_env(),
            **self.codec.to_env(),
            "DSMO_STATE_DIR": str(self.state_dir),
        }

    @property
    def outbox_dir(self) -> Path:
        """Where the ``file`` channel writes messages: ``DSMO_OUTBOX_DIR``, else under the state folder."""
        override = self.messaging.outbox_dir_override
        return Path(override) if override else self.state_dir / "outbox"

    @property
    def api_keys_path(self) -> Path:
        """The ingress's hashed API keys: ``DSMO_API_KEYS_FILE``, else under the state folder."""
        return Path(self.ingress.api_keys_file) if self.ingress.api_keys_file else self.state_dir / "api-keys.json"
