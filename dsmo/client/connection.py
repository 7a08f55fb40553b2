"""The connection to Temporal: its data converter (with the payload codec), TLS, and connect."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from dsmo.client.client_errors import TemporalUnavailable
from dsmo.client.codec import EncryptionCodec, keys_from_env
from dsmo.client.payloads import PYDANTIC_DATA_CONVERTER
from dsmo.config.settings import Settings, SettingsError
from dsmo.runtime.telemetry import tracing_interceptors


def data_converter(settings: Settings) -> DataConverter:
    """Pydantic JSON, encrypted with AES-GCM when codec keys are configured."""
    keys = keys_from_env(settings.codec.to_env())
    if not keys:
        return PYDANTIC_DATA_CONVERTER
    return dataclasses.replace(PYDANTIC_DATA_CONVERTER, payload_codec=EncryptionCodec(keys))


def temporal_tls(settings: Settings) -> TLSConfig | bool:
    """A TLSConfig for the Temporal connection (mTLS with a client cert), or False for plaintext."""
    if not (settings.temporal.tls_cert or settings.temporal.tls_ca):
        return False

    def read(path: str, name: str) -> bytes | None:
        if not path:
            return None
        try:
            return Path(path).read_bytes()
        except OSError as err:
            raise SettingsError(f"{name}: cannot read {path}: {err.strerror}") from None

    return TLSConfig(
        client_cert=read(settings.temporal.tls_cert, "TEMPORAL_TLS_CERT"),
        client_private_key=read(settings.temporal.tls_key, "TEMPORAL_TLS_KEY"),
        server_root_ca_cert=read(settings.temporal.tls_ca, "TEMPORAL_TLS_CA"),
        domain=settings.temporal.tls_server_name or None,
    )


async def connect_temporal(settings: Settings, *, runtime: Runtime | None = None, lazy: bool = False) -> Client:
    """A Temporal client for ``settings`` (namespace, TLS, codec, tracing).

    Args:
        settings: Where Temporal is and how to reach it.
        runtime: The Temporal runtime to use (the worker passes its metrics runtime).
        lazy: Connect on the first call instead of now (for work that may need no Temporal).

    Returns:
        The connected client.

    Raises:
        TemporalUnavailable: Temporal cannot be reached.
        SettingsError: A TLS file cannot be read.
    """
    try:
        return await Client.connect(
            settings.temporal.address,
            namespace=settings.temporal.namespace,
            data_converter=data_converter(settings),
            interceptors=tracing_interceptors(),
            runtime=runtime,
            tls=temporal_tls(settings),
            lazy=lazy,
        )
    except RuntimeError as err:
        raise TemporalUnavailable(
            f"TEMPORAL_ADDRESS: cannot reach Temporal at {settings.temporal.address} ({first_line(err)}); "
            "start the stack with `dsmo dev up`"
        ) from None


def first_line(err: BaseException) -> str:
    """The first line of an error's text (its type's name if it has none)."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
