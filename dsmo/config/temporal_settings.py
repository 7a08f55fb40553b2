"""Where Temporal is, how to reach it, and which task queue and Web UI DSMO uses there.

Temporal's own variable names (``TEMPORAL_ADDRESS``, ``TEMPORAL_TLS_*``), so the `temporal` CLI
reads the same environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from dsmo.config.env_values import EnvReader, SettingsError, duration_value, port_number

DEFAULT_TASK_QUEUE = "agent-executions"


@dataclass(frozen=True)
class TemporalSettings:
    """The Temporal server, its namespace, the workers' task queue and the Web UI.

    Attributes:
        address: Temporal's frontend, ``host:port`` [``TEMPORAL_ADDRESS``].
        namespace: The namespace runs live in [``TEMPORAL_NAMESPACE``].
        task_queue: The workers' task queue [``DSMO_TASK_QUEUE``].
        ui_port: The Temporal Web UI's port on the embedded stack [``DSMO_UI_PORT``].
        ui_url_override: The Web UI's base URL, when it is elsewhere [``DSMO_UI_URL``].
        tls_cert: Client certificate for Temporal [``TEMPORAL_TLS_CERT``].
        tls_key: Its private key [``TEMPORAL_TLS_KEY``].
        tls_ca: The CA that signed Temporal's certificate [``TEMPORAL_TLS_CA``].
        tls_server_name: The name to verify it against [``TEMPORAL_TLS_SERVER_NAME``].
        namespace_retention: How long the embedded stack's namespace keeps an ended run's history
            (the dev server's own default is a day) [``DSMO_NAMESPACE_RETENTION``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        "TEMPORAL_ADDRESS": "127.0.0.1:7233",
        "TEMPORAL_NAMESPACE": "default",
        "DSMO_TASK_QUEUE": DEFAULT_TASK_QUEUE,
        "DSMO_UI_PORT": "8233",
        "DSMO_UI_URL": "",
        "DSMO_NAMESPACE_RETENTION": "30d",
        # Temporal's own TLS variables (the `temporal` CLI reads the same ones).
        "TEMPORAL_TLS_CERT": "",
        "TEMPORAL_TLS_KEY": "",
        "TEMPORAL_TLS_CA": "",
        "TEMPORAL_TLS_SERVER_NAME": "",
    }

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    ui_port: int = 8233
    ui_url_override: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    tls_server_name: str = ""
    namespace_retention: str = "30d"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TemporalSettings:
        """Read and check this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.

        Raises:
            SettingsError: A value is invalid, or only one of the certificate and its key is given.
        """
        read = EnvReader(env, cls.VARIABLES)
        settings = cls(
            address=read.text("TEMPORAL_ADDRESS"),
            namespace=read.text("TEMPORAL_NAMESPACE"),
            task_queue=read.text("DSMO_TASK_QUEUE"),
            ui_port=read.port("DSMO_UI_PORT"),
            ui_url_override=read.text("DSMO_UI_URL"),
            tls_cert=read.text("TEMPORAL_TLS_CERT"),
            tls_key=read.text("TEMPORAL_TLS_KEY"),
            tls_ca=read.text("TEMPORAL_TLS_CA"),
            tls_server_name=read.text("TEMPORAL_TLS_SERVER_NAME"),
            namespace_retention=read.text("DSMO_NAMESPACE_RETENTION"),
        )
        if bool(settings.tls_cert) != bool(settings.tls_key):
            raise SettingsError("TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY: give both (mTLS) or neither")
        settings.port  # noqa: B018 - validates the address early
        settings.history_retention  # noqa: B018 - and the retention
        return settings

    def to_env(self) -> dict[str, str]:
        """The variables that make another process read these settings.

        Returns:
            Variable names and values; the TLS ones only when set, because the `temporal` CLI
            turns TLS on when they merely exist.
        """
        return {
            "TEMPORAL_ADDRESS": self.address,
            "TEMPORAL_NAMESPACE": self.namespace,
            "DSMO_TASK_QUEUE": self.task_queue,
            "DSMO_UI_PORT": str(self.ui_port),
            "DSMO_UI_URL": self.ui_url_override,
            "DSMO_NAMESPACE_RETENTION": self.namespace_retention,
        } | {
            name: value
            for name, value in (
                ("TEMPORAL_TLS_CERT", self.tls_cert),
                ("TEMPORAL_TLS_KEY", self.tls_key),
                ("TEMPORAL_TLS_CA", self.tls_ca),
                ("TEMPORAL_TLS_SERVER_NAME", self.tls_server_name),
            )
            if value
        }

    @property
    def history_retention(self) -> timedelta:
        """The embedded stack's namespace retention.

        Raises:
            SettingsError: ``DSMO_NAMESPACE_RETENTION`` is not a duration of at least a day.
        """
        period = duration_value(
            self.namespace_retention, "DSMO_NAMESPACE_RETENTION", at_least=timedelta(days=1), shortest="1d"
        )
        return period

    @property
    def host(self) -> str:
        """The host part of the address."""
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        """The port part of the address.

        Raises:
            SettingsError: The address has no valid port.
        """
        _, _, port = self.address.rpartition(":")
        return port_number(port, "TEMPORAL_ADDRESS")

    @property
    def ui_url(self) -> str:
        """The Web UI's base URL: the one given, or the UI port on Temporal's host."""
        return self.ui_url_override or f"http://{self.host}:{self.ui_port}"

    def run_url(self, run_id: str) -> str:
        """Link to a run in the Temporal Web UI.

        Args:
            run_id: The run.

        Returns:
            The run's page in the Web UI of this namespace.
        """
        return f"{self.ui_url}/namespaces/{self.namespace}/workflows/{run_id}"
