"""The HTTP ingress and console of `dsmo serve`: where they listen, who may call, how often."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dsmo.config.env_values import EnvReader, SettingsError

DOCS_MODES = ("read", "public", "off")


@dataclass(frozen=True)
class IngressSettings:
    """Where `dsmo serve` listens, its API keys, its API description and its event rate.

    Attributes:
        bind: Where `dsmo serve` listens, ``host:port`` [``DSMO_INGRESS_BIND``].
        api_keys_file: The hashed API keys, when not under the state folder [``DSMO_API_KEYS_FILE``].
        docs: The API description (/docs, /openapi.json): ``read``, ``public`` or ``off``
            [``DSMO_INGRESS_DOCS``].
        events_per_second: Events per second each key may deliver [``DSMO_INGRESS_EVENTS_PER_SECOND``].
        event_burst: The burst above that rate, at least 1 [``DSMO_INGRESS_EVENT_BURST``].
        head_timeout: Seconds a request's head (its line and headers) may take to arrive, from its
            first byte or the connection's opening [``DSMO_INGRESS_HEAD_TIMEOUT``].
        body_timeout: Seconds a request's whole body may take to arrive [``DSMO_INGRESS_BODY_TIMEOUT``].
        stream_lifetime: Seconds a live stream's response lasts before the server ends it and the
            client reconnects with its last id [``DSMO_INGRESS_STREAM_LIFETIME``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        "DSMO_INGRESS_BIND": "127.0.0.1:8080",
        "DSMO_API_KEYS_FILE": "",
        # The ingress's API description (/docs, /openapi.json): behind the `read` scope, public, or off.
        "DSMO_INGRESS_DOCS": "read",
        # Events each API key may deliver per second through the ingress, and the burst above that rate.
        "DSMO_INGRESS_EVENTS_PER_SECOND": "10",
        "DSMO_INGRESS_EVENT_BURST": "20",
        # A slow sender holds a connection only this long: its head, then its whole body (408 after).
        "DSMO_INGRESS_HEAD_TIMEOUT": "10",
        "DSMO_INGRESS_BODY_TIMEOUT": "60",
        # A live stream's response ends after this long; the client reconnects where it was.
        "DSMO_INGRESS_STREAM_LIFETIME": "300",
    }

    bind: str = "127.0.0.1:8080"
    api_keys_file: str = ""
    docs: str = "read"
    events_per_second: float = 10.0
    event_burst: int = 20
    head_timeout: float = 10.0
    body_timeout: float = 60.0
    stream_lifetime: float = 300.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> IngressSettings:
        """Read and check this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.

        Raises:
            SettingsError: A value is invalid.
        """
        read = EnvReader(env, cls.VARIABLES)
        settings = cls(
            bind=read.text("DSMO_INGRESS_BIND"),
            api_keys_file=read.text("DSMO_API_KEYS_FILE"),
            docs=read.text("DSMO_INGRESS_DOCS").strip().lower(),
            events_per_second=read.positive_number("DSMO_INGRESS_EVENTS_PER_SECOND"),
            event_burst=read.whole_number("DSMO_INGRESS_EVENT_BURST", at_least=1),
            head_timeout=read.positive_number("DSMO_INGRESS_HEAD_TIMEOUT"),
            body_timeout=read.positive_number("DSMO_INGRESS_BODY_TIMEOUT"),
            stream_lifetime=read.positive_number("DSMO_INGRESS_STREAM_LIFETIME"),
        )
        if settings.docs not in DOCS_MODES:
            raise SettingsError(f"DSMO_INGRESS_DOCS: {settings.docs!r} is not read, public or off")
        return settings

    def to_env(self) -> dict[str, str]:
        """The variables that make another process read these settings.

        Returns:
            Variable names and values.
        """
        return {
            "DSMO_INGRESS_BIND": self.bind,
            "DSMO_API_KEYS_FILE": self.api_keys_file,
            "DSMO_INGRESS_DOCS": self.docs,
            "DSMO_INGRESS_EVENTS_PER_SECOND": str(self.events_per_second),
            "DSMO_INGRESS_EVENT_BURST": str(self.event_burst),
            "DSMO_INGRESS_HEAD_TIMEOUT": f"{self.head_timeout:g}",
            "DSMO_INGRESS_BODY_TIMEOUT": f"{self.body_timeout:g}",
            "DSMO_INGRESS_STREAM_LIFETIME": f"{self.stream_lifetime:g}",
        }
