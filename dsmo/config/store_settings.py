"""The S3-compatible object store that holds artifacts, definitions and audit exports.

The AWS SDK's own variable names (``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``, ...), so the
official tools read the same environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar
from urllib.parse import urlparse

from pydantic import ValidationError

from dsmo.config.env_values import EnvReader, SettingsError, duration_value
from dsmo.workflows.definition.retention import MIN_RETENTION, Retention


@dataclass(frozen=True)
class StoreSettings:
    """The object store, its credentials and bucket, and the worker's cache of what it wrote.

    Attributes:
        endpoint: The S3-compatible store [``AWS_ENDPOINT_URL_S3``].
        access_key: Its access key id [``AWS_ACCESS_KEY_ID``].
        secret_key: Its secret key [``AWS_SECRET_ACCESS_KEY``].
        region: Its region [``AWS_REGION``, else ``AWS_DEFAULT_REGION``].
        bucket: The bucket for artifacts, definitions and audit exports [``DSMO_ARTIFACT_BUCKET``].
        cache_mb: The worker's cache of artifacts it wrote, in MB; 0 turns it off
            [``DSMO_ARTIFACT_CACHE_MB``].
        seaweed_port_base: First of the embedded S3 store's internal ports [``DSMO_SEAWEED_PORT_BASE``].
        retention_ended: How long an ended run's objects and history are kept when its definition
            says nothing; empty keeps them [``DSMO_RETENTION_ENDED``].
        retention_trail: The same for its audit trail [``DSMO_RETENTION_TRAIL``].
        sweep_every: How often the retention sweep runs (a Temporal Schedule the worker creates)
            [``DSMO_RETENTION_SWEEP_EVERY``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333",
        "AWS_ACCESS_KEY_ID": "dsmo",
        "AWS_SECRET_ACCESS_KEY": "dsmo-dev-secret",
        "AWS_REGION": "us-east-1",
        "DSMO_ARTIFACT_BUCKET": "dsmo-artifacts",
        # Worker-local cache of the immutable artifacts it wrote (stage outputs, run inputs); 0 turns it off.
        "DSMO_ARTIFACT_CACHE_MB": "64",
        "DSMO_SEAWEED_PORT_BASE": "19330",
        "DSMO_RETENTION_ENDED": "",
        "DSMO_RETENTION_TRAIL": "",
        "DSMO_RETENTION_SWEEP_EVERY": "1h",
    }

    endpoint: str = "http://127.0.0.1:8333"
    access_key: str = "dsmo"
    secret_key: str = "dsmo-dev-secret"
    region: str = "us-east-1"
    bucket: str = "dsmo-artifacts"
    cache_mb: int = 64
    seaweed_port_base: int = 19330
    retention_ended: str = ""
    retention_trail: str = ""
    sweep_every: str = "1h"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StoreSettings:
        """Read and check this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.

        Raises:
            SettingsError: A value is invalid, for example an endpoint that is not an http(s) URL.
        """
        read = EnvReader(env, cls.VARIABLES)
        settings = cls(
            endpoint=read.text("AWS_ENDPOINT_URL_S3"),
            access_key=read.text("AWS_ACCESS_KEY_ID"),
            secret_key=read.text("AWS_SECRET_ACCESS_KEY"),
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or read.text("AWS_REGION"),
            bucket=read.text("DSMO_ARTIFACT_BUCKET"),
            cache_mb=read.whole_number("DSMO_ARTIFACT_CACHE_MB"),
            seaweed_port_base=read.port("DSMO_SEAWEED_PORT_BASE"),
            retention_ended=read.text("DSMO_RETENTION_ENDED"),
            retention_trail=read.text("DSMO_RETENTION_TRAIL"),
            sweep_every=read.text("DSMO_RETENTION_SWEEP_EVERY"),
        )
        settings.port  # noqa: B018 - validates the endpoint early
        settings.retention  # noqa: B018 - and the periods
        settings.sweep_interval  # noqa: B018
        return settings

    def to_env(self) -> dict[str, str]:
        """The variables that make another process read these settings.

        Returns:
            Variable names and values.
        """
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "DSMO_ARTIFACT_BUCKET": self.bucket,
            "DSMO_ARTIFACT_CACHE_MB": str(self.cache_mb),
            "DSMO_SEAWEED_PORT_BASE": str(self.seaweed_port_base),
            "DSMO_RETENTION_ENDED": self.retention_ended,
            "DSMO_RETENTION_TRAIL": self.retention_trail,
            "DSMO_RETENTION_SWEEP_EVERY": self.sweep_every,
        }

    @property
    def retention(self) -> Retention:
        """The default retention of definitions that name none (or leave a period out).

        Raises:
            SettingsError: A period is not a duration, or the two contradict, naming the variable.
        """
        periods = {}
        for name, variable, text in (
            ("ended", "DSMO_RETENTION_ENDED", self.retention_ended),
            ("trail", "DSMO_RETENTION_TRAIL", self.retention_trail),
        ):
            if text:
                periods[name] = duration_value(text, variable, at_least=MIN_RETENTION, shortest="1h")
        try:
            return Retention(**periods)
        except ValidationError as err:
            reason = err.errors()[0]["msg"].removeprefix("Value error, ")
            raise SettingsError(f"DSMO_RETENTION_{reason.split(':')[0].upper()}: {reason}") from None

    @property
    def sweep_interval(self) -> timedelta:
        """How often the retention sweep runs.

        Raises:
            SettingsError: ``DSMO_RETENTION_SWEEP_EVERY`` is not a duration of at least a minute.
        """
        interval = duration_value(
            self.sweep_every, "DSMO_RETENTION_SWEEP_EVERY", at_least=timedelta(minutes=1), shortest="1m"
        )
        return interval

    @property
    def port(self) -> int:
        """The endpoint's port (80 or 443 when the URL names none).

        Raises:
            SettingsError: The endpoint is not an http(s) URL with a host.
        """
        parsed = urlparse(self.endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SettingsError(f"AWS_ENDPOINT_URL_S3: {self.endpoint!r} is not an http(s) URL with a host")
        return parsed.port or (443 if parsed.scheme == "https" else 80)
