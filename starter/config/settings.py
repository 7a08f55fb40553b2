"""One typed view of the configuration every DSMO process reads.

Temporal and the AWS SDK keep their own variable names (``TEMPORAL_ADDRESS``,
``AWS_ENDPOINT_URL_S3``, ...) so the official tools read the same environment;
everything else is ``DSMO_*``.

Longer than most modules because `Settings` documents each of its ~35 fields and validates
each value where it is read; it does nothing else.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN

DEFAULT_TASK_QUEUE = "agent-executions"

# Every environment variable a DSMO process reads, with its default. docker-compose.yml is
# checked against this table by a test, so the production-like stack uses the same names.
ENVIRONMENT: dict[str, str] = {
    "TEMPORAL_ADDRESS": "127.0.0.1:7233",
    "TEMPORAL_NAMESPACE": "default",
    "DSMO_TASK_QUEUE": DEFAULT_TASK_QUEUE,
    "DSMO_UI_PORT": "8233",
    "DSMO_UI_URL": "",
    "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333",
    "AWS_ACCESS_KEY_ID": "dsmo",
    "AWS_SECRET_ACCESS_KEY": "dsmo-dev-secret",
    "AWS_REGION": "us-east-1",
    "DSMO_ARTIFACT_BUCKET": "dsmo-artifacts",
    "DSMO_STATE_DIR": ".dsmo",
    "DSMO_SEAWEED_PORT_BASE": "19330",
    "DSMO_OUTBOX_DIR": "",
    "DSMO_CHANNEL": "file",
    "DSMO_WEBHOOK_URL": "",
    "DSMO_WEBHOOK_TOKEN": "",
    "DSMO_LLM_BASE_URL": "",
    "DSMO_LLM_MODEL": "gpt-4o-mini",
    "DSMO_LLM_API_KEY": "",
    "DSMO_LLM_MODELS": "",
    # The most of one model response a worker reads (4 MiB); a longer answer is refused, recorded.
    "DSMO_LLM_MAX_RESPONSE_BYTES": "4194304",
    "DSMO_CODEC_KEYS": "",
    "DSMO_CODEC_KEYS_FILE": "",
    "DSMO_METRICS_BIND": "127.0.0.1:9464",
    "DSMO_API_KEYS_FILE": "",
    "DSMO_INGRESS_BIND": "127.0.0.1:8080",
    # Temporal's workflow sandbox: off by default (DSMO's workflow code is fixed and checked for
    # determinism by its tests; the sandbox costs ~10 ms of worker CPU per run); the suite runs with it on.
    "DSMO_WORKFLOW_SANDBOX": "off",
    # Worker-local cache of the immutable artifacts it wrote (stage outputs, run inputs); 0 turns it off.
    "DSMO_ARTIFACT_CACHE_MB": "64",
    # Message and event text in the worker's log (on for debugging only; off logs metadata).
    "DSMO_LOG_CONTENT": "off",
    # The ingress's API description (/docs, /openapi.json): behind the `read` scope, public, or off.
    "DSMO_INGRESS_DOCS": "read",
    # Events each API key may deliver per second through the ingress, and the burst above that rate.
    "DSMO_INGRESS_EVENTS_PER_SECOND": "10",
    "DSMO_INGRESS_EVENT_BURST": "20",
    # Plugins the worker imports at start (comma-separated modules), beside the `dsmo.plugins` entry points.
    "DSMO_LOAD": "",
    # Activities one worker runs at once, and the threads for plain (non-async) processors and
    # activities. Raise the first for async agents (model calls): they wait on the event loop.
    "DSMO_MAX_CONCURRENT_ACTIVITIES": "16",
    "DSMO_PROCESSOR_THREADS": "16",
    # Workflow tasks one worker holds at once (Temporal's default; see dsmo.worker.WORKFLOW_TASK_SLOTS).
    "DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "100",
    # Temporal's own TLS variables (the `temporal` CLI reads the same ones).
    "TEMPORAL_TLS_CERT": "",
    "TEMPORAL_TLS_KEY": "",
    "TEMPORAL_TLS_CA": "",
    "TEMPORAL_TLS_SERVER_NAME": "",
}


class SettingsError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    """Where the Temporal server, the object store and the local state live, and how DSMO behaves.

    Build it with `Settings.from_env()`: each field is read from one environment variable
    (in brackets below; the operations page lists the defaults).

    Attributes:
        temporal_address: Temporal's frontend, ``host:port`` [``TEMPORAL_ADDRESS``].
        temporal_namespace: The namespace runs live in [``TEMPORAL_NAMESPACE``].
        task_queue: The workers' task queue [``DSMO_TASK_QUEUE``].
        ui_port: The Temporal Web UI's port on the embedded stack [``DSMO_UI_PORT``].
        ui_url_override: The Web UI's base URL, when it is elsewhere [``DSMO_UI_URL``].
        s3_endpoint: The S3-compatible store [``AWS_ENDPOINT_URL_S3``].
        s3_access_key: Its access key id [``AWS_ACCESS_KEY_ID``].
        s3_secret_key: Its secret key [``AWS_SECRET_ACCESS_KEY``].
        s3_region: Its region [``AWS_REGION``].
        artifact_bucket: The bucket for artifacts, definitions and audit exports [``DSMO_ARTIFACT_BUCKET``].
        state_dir: Local state: the embedded stack's data, pid files, the key file [``DSMO_STATE_DIR``].
        seaweed_port_base: First of the embedded S3 store's internal ports [``DSMO_SEAWEED_PORT_BASE``].
        outbox_dir_override: Where the ``file`` channel writes messages [``DSMO_OUTBOX_DIR``].
        channel: The default channel of messages: ``file``, ``webhook`` or a plugin's [``DSMO_CHANNEL``].
        webhook_url: The ``webhook`` channel's endpoint [``DSMO_WEBHOOK_URL``].
        webhook_token: Its bearer token [``DSMO_WEBHOOK_TOKEN``].
        llm_base_url: An OpenAI-compatible endpoint for LLM stages [``DSMO_LLM_BASE_URL``].
        llm_model: The model LLM stages ask for [``DSMO_LLM_MODEL``].
        llm_api_key: The endpoint's key [``DSMO_LLM_API_KEY``].
        llm_models: Model aliases `llm` nodes may name, ``alias=model`` comma-separated
            (``fast=gpt-4o-mini,smart=gpt-4o``) [``DSMO_LLM_MODELS``].
        llm_max_response_bytes: The most of one model response a worker reads, at least 1024;
            a longer answer is refused [``DSMO_LLM_MAX_RESPONSE_BYTES``].
        codec_keys: Payload encryption keys, ``id:base64`` comma-separated [``DSMO_CODEC_KEYS``].
        codec_keys_file: The same keys read from a file [``DSMO_CODEC_KEYS_FILE``].
        metrics_bind: Where the worker serves Prometheus metrics [``DSMO_METRICS_BIND``].
        api_keys_file: The ingress's hashed API keys [``DSMO_API_KEYS_FILE``].
        ingress_bind: Where `dsmo serve` listens [``DSMO_INGRESS_BIND``].
        workflow_sandbox: Run workflows in Temporal's sandbox [``DSMO_WORKFLOW_SANDBOX``].
        artifact_cache_mb: The worker's cache of artifacts it wrote, in MB [``DSMO_ARTIFACT_CACHE_MB``].
        log_content: Log message and event text, not only metadata [``DSMO_LOG_CONTENT``].
        ingress_docs: The ingress's API description: ``read``, ``public`` or ``off`` [``DSMO_INGRESS_DOCS``].
        ingress_events_per_second: Events per second each key may deliver [``DSMO_INGRESS_EVENTS_PER_SECOND``].
        ingress_event_burst: The burst above that rate [``DSMO_INGRESS_EVENT_BURST``].
        load: Plugin modules the worker imports, comma-separated [``DSMO_LOAD``].
        max_concurrent_activities: Activities one worker runs at once [``DSMO_MAX_CONCURRENT_ACTIVITIES``].
        processor_threads: Threads for plain processors and activities [``DSMO_PROCESSOR_THREADS``].
        max_concurrent_workflow_tasks: Workflow tasks one worker holds at once, at least 2
            [``DSMO_MAX_CONCURRENT_WORKFLOW_TASKS``].
        tls_cert: Client certificate for Temporal [``TEMPORAL_TLS_CERT``].
        tls_key: Its private key [``TEMPORAL_TLS_KEY``].
        tls_ca: The CA that signed Temporal's certificate [``TEMPORAL_TLS_CA``].
        tls_server_name: The name to verify it against [``TEMPORAL_TLS_SERVER_NAME``].
    """

    temporal_address: str = ENVIRONMENT["TEMPORAL_ADDRESS"]
    temporal_namespace: str = ENVIRONMENT["TEMPORAL_NAMESPACE"]
    task_queue: str = DEFAULT_TASK_QUEUE
    ui_port: int = 8233
    ui_url_override: str = ""
    s3_endpoint: str = ENVIRONMENT["AWS_ENDPOINT_URL_S3"]
    s3_access_key: str = ENVIRONMENT["AWS_ACCESS_KEY_ID"]
    s3_secret_key: str = ENVIRONMENT["AWS_SECRET_ACCESS_KEY"]
    s3_region: str = ENVIRONMENT["AWS_REGION"]
    artifact_bucket: str = ENVIRONMENT["DSMO_ARTIFACT_BUCKET"]
    state_dir: Path = field(default_factory=lambda: Path(ENVIRONMENT["DSMO_STATE_DIR"]).resolve())
    seaweed_port_base: int = 19330
    outbox_dir_override: str = ""
    channel: str = "file"
    webhook_url: str = ""
    webhook_token: str = ""
    llm_base_url: str = ""
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str = ""
    llm_models: str = ""
    llm_max_response_bytes: int = 4 << 20
    codec_keys: str = ""
    codec_keys_file: str = ""
    metrics_bind: str = "127.0.0.1:9464"
    api_keys_file: str = ""
    ingress_bind: str = "127.0.0.1:8080"
    workflow_sandbox: bool = False
    artifact_cache_mb: int = 64
    log_content: bool = False
    ingress_docs: str = "read"
    ingress_events_per_second: float = 10.0
    ingress_event_burst: int = 20
    load: str = ""
    max_concurrent_activities: int = 16
    processor_threads: int = 16
    max_concurrent_workflow_tasks: int = 100
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    tls_server_name: str = ""

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

        def get(name: str) -> str:
            return source.get(name) or ENVIRONMENT[name]

        settings = cls(
            temporal_address=get("TEMPORAL_ADDRESS"),
            temporal_namespace=get("TEMPORAL_NAMESPACE"),
            task_queue=get("DSMO_TASK_QUEUE"),
            ui_port=_port(get("DSMO_UI_PORT"), "DSMO_UI_PORT"),
            ui_url_override=get("DSMO_UI_URL"),
            s3_endpoint=get("AWS_ENDPOINT_URL_S3"),
            s3_access_key=get("AWS_ACCESS_KEY_ID"),
            s3_secret_key=get("AWS_SECRET_ACCESS_KEY"),
            s3_region=source.get("AWS_REGION") or source.get("AWS_DEFAULT_REGION") or "us-east-1",
            artifact_bucket=get("DSMO_ARTIFACT_BUCKET"),
            state_dir=Path(get("DSMO_STATE_DIR")).expanduser().resolve(),
            seaweed_port_base=_port(get("DSMO_SEAWEED_PORT_BASE"), "DSMO_SEAWEED_PORT_BASE"),
            outbox_dir_override=get("DSMO_OUTBOX_DIR"),
            channel=get("DSMO_CHANNEL"),
            webhook_url=get("DSMO_WEBHOOK_URL"),
            webhook_token=get("DSMO_WEBHOOK_TOKEN"),
            llm_base_url=get("DSMO_LLM_BASE_URL"),
            llm_model=get("DSMO_LLM_MODEL"),
            llm_api_key=get("DSMO_LLM_API_KEY"),
            llm_models=get("DSMO_LLM_MODELS"),
            llm_max_response_bytes=_whole_number(get("DSMO_LLM_MAX_RESPONSE_BYTES"), "DSMO_LLM_MAX_RESPONSE_BYTES"),
            codec_keys=get("DSMO_CODEC_KEYS"),
            codec_keys_file=get("DSMO_CODEC_KEYS_FILE"),
            metrics_bind="" if source.get("DSMO_METRICS_BIND") == "off" else get("DSMO_METRICS_BIND"),
            api_keys_file=get("DSMO_API_KEYS_FILE"),
            ingress_bind=get("DSMO_INGRESS_BIND"),
            workflow_sandbox=workflow_sandbox_from(source),
            artifact_cache_mb=_whole_number(get("DSMO_ARTIFACT_CACHE_MB"), "DSMO_ARTIFACT_CACHE_MB"),
            log_content=_switch(source, "DSMO_LOG_CONTENT"),
            ingress_docs=get("DSMO_INGRESS_DOCS").strip().lower(),
            ingress_events_per_second=_positive_number(
                get("DSMO_INGRESS_EVENTS_PER_SECOND"), "DSMO_INGRESS_EVENTS_PER_SECOND"
            ),
            ingress_event_burst=max(1, _whole_number(get("DSMO_INGRESS_EVENT_BURST"), "DSMO_INGRESS_EVENT_BURST")),
            load=get("DSMO_LOAD"),
            max_concurrent_activities=max(
                1, _whole_number(get("DSMO_MAX_CONCURRENT_ACTIVITIES"), "DSMO_MAX_CONCURRENT_ACTIVITIES")
            ),
            processor_threads=max(1, _whole_number(get("DSMO_PROCESSOR_THREADS"), "DSMO_PROCESSOR_THREADS")),
            max_concurrent_workflow_tasks=max(
                2, _whole_number(get("DSMO_MAX_CONCURRENT_WORKFLOW_TASKS"), "DSMO_MAX_CONCURRENT_WORKFLOW_TASKS")
            ),
            tls_cert=get("TEMPORAL_TLS_CERT"),
            tls_key=get("TEMPORAL_TLS_KEY"),
            tls_ca=get("TEMPORAL_TLS_CA"),
            tls_server_name=get("TEMPORAL_TLS_SERVER_NAME"),
        )
        if bool(settings.tls_cert) != bool(settings.tls_key):
            raise SettingsError("TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY: give both (mTLS) or neither")
        if settings.ingress_docs not in ("read", "public", "off"):
            raise SettingsError(f"DSMO_INGRESS_DOCS: {settings.ingress_docs!r} is not read, public or off")
        if not re.fullmatch(AGENT_NAME_PATTERN, settings.channel):
            raise SettingsError(f"DSMO_CHANNEL: {settings.channel!r} is not a channel name")
        settings.llm_aliases  # noqa: B018 - validates the aliases early
        if settings.llm_max_response_bytes < 1024:
            raise SettingsError(f"DSMO_LLM_MAX_RESPONSE_BYTES: {settings.llm_max_response_bytes} is below 1024")
        if settings.channel == "webhook" and not settings.webhook_url:
            raise SettingsError("DSMO_WEBHOOK_URL: required when DSMO_CHANNEL=webhook")
        settings.temporal_port  # noqa: B018 - validates the address early
        settings.s3_port  # noqa: B018
        return settings

    def with_changes(self, **changes: Any) -> Settings:
        """A copy with some fields changed.

        Args:
            **changes: Field names and their new values.

        Returns:
            The new settings; these are unchanged.
        """
        return replace(self, **changes)

    def to_env(self) -> dict[str, str]:
        """The environment that makes another process (worker, CLI, `temporal`) see these settings.

        Returns:
            Variable names and values, every one a `from_env` reads.
        """
        return {
            "TEMPORAL_ADDRESS": self.temporal_address,
            "TEMPORAL_NAMESPACE": self.temporal_namespace,
            "DSMO_TASK_QUEUE": self.task_queue,
            "DSMO_UI_PORT": str(self.ui_port),
            "DSMO_UI_URL": self.ui_url_override,
            "AWS_ENDPOINT_URL_S3": self.s3_endpoint,
            "AWS_ACCESS_KEY_ID": self.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3_secret_key,
            "AWS_REGION": self.s3_region,
            "DSMO_ARTIFACT_BUCKET": self.artifact_bucket,
            "DSMO_STATE_DIR": str(self.state_dir),
            "DSMO_SEAWEED_PORT_BASE": str(self.seaweed_port_base),
            "DSMO_OUTBOX_DIR": self.outbox_dir_override,
            "DSMO_CHANNEL": self.channel,
            "DSMO_WEBHOOK_URL": self.webhook_url,
            "DSMO_WEBHOOK_TOKEN": self.webhook_token,
            "DSMO_LLM_BASE_URL": self.llm_base_url,
            "DSMO_LLM_MODEL": self.llm_model,
            "DSMO_LLM_API_KEY": self.llm_api_key,
            "DSMO_LLM_MODELS": self.llm_models,
            "DSMO_LLM_MAX_RESPONSE_BYTES": str(self.llm_max_response_bytes),
            "DSMO_CODEC_KEYS": self.codec_keys,
            "DSMO_CODEC_KEYS_FILE": self.codec_keys_file,
            "DSMO_METRICS_BIND": self.metrics_bind or "off",
            "DSMO_API_KEYS_FILE": self.api_keys_file,
            "DSMO_INGRESS_BIND": self.ingress_bind,
            "DSMO_WORKFLOW_SANDBOX": "on" if self.workflow_sandbox else "off",
            "DSMO_ARTIFACT_CACHE_MB": str(self.artifact_cache_mb),
            "DSMO_LOG_CONTENT": "on" if self.log_content else "off",
            "DSMO_INGRESS_DOCS": self.ingress_docs,
            "DSMO_INGRESS_EVENTS_PER_SECOND": str(self.ingress_events_per_second),
            "DSMO_INGRESS_EVENT_BURST": str(self.ingress_event_burst),
            "DSMO_LOAD": self.load,
            "DSMO_MAX_CONCURRENT_ACTIVITIES": str(self.max_concurrent_activities),
            "DSMO_PROCESSOR_THREADS": str(self.processor_threads),
            "DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": str(self.max_concurrent_workflow_tasks),
        } | {
            # Only when set: the `temporal` CLI turns TLS on when these variables merely exist.
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
    def temporal_host(self) -> str:
        return self.temporal_address.rsplit(":", 1)[0]

    @property
    def llm_aliases(self) -> dict[str, str]:
        """The model aliases of ``DSMO_LLM_MODELS``, alias to model.

        Raises:
            SettingsError: An entry is not ``alias=model``.
        """
        aliases: dict[str, str] = {}
        for entry in filter(None, (part.strip() for part in self.llm_models.split(","))):
            alias, equals, model = (part.strip() for part in entry.partition("="))
            if not equals or not alias or not model:
                raise SettingsError(f"DSMO_LLM_MODELS: {entry!r} is not alias=model")
            aliases[alias] = model
        return aliases

    @property
    def temporal_port(self) -> int:
        _, _, port = self.temporal_address.rpartition(":")
        return _port(port, "TEMPORAL_ADDRESS")

    @property
    def s3_port(self) -> int:
        parsed = urlparse(self.s3_endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SettingsError(f"AWS_ENDPOINT_URL_S3: {self.s3_endpoint!r} is not an http(s) URL with a host")
        return parsed.port or (443 if parsed.scheme == "https" else 80)

    @property
    def ui_url(self) -> str:
        return self.ui_url_override or f"http://{self.temporal_host}:{self.ui_port}"

    @property
    def outbox_dir(self) -> Path:
        return Path(self.outbox_dir_override) if self.outbox_dir_override else self.state_dir / "outbox"

    def codec_env(self) -> dict[str, str]:
        """The payload-encryption variables alone (for a process that only needs the codec).

        Returns:
            ``DSMO_CODEC_KEYS`` and ``DSMO_CODEC_KEYS_FILE`` with their values.
        """
        return {"DSMO_CODEC_KEYS": self.codec_keys, "DSMO_CODEC_KEYS_FILE": self.codec_keys_file}

    @property
    def api_keys_path(self) -> Path:
        return Path(self.api_keys_file) if self.api_keys_file else self.state_dir / "api-keys.json"

    def run_url(self, run_id: str) -> str:
        """Link to a run in the Temporal Web UI.

        Args:
            run_id: The run.

        Returns:
            The run's page in the Web UI of these settings' namespace.
        """
        return f"{self.ui_url}/namespaces/{self.temporal_namespace}/workflows/{run_id}"


def _port(value: str, name: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise SettingsError(f"{name}: {value!r} is not a port number") from None
    if not 0 < port < 65536:
        raise SettingsError(f"{name}: {port} is outside 1-65535")
    return port


_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


def workflow_sandbox_from(env: Mapping[str, str]) -> bool:
    """``DSMO_WORKFLOW_SANDBOX``: run workflows inside Temporal's sandbox (on/off)."""
    return _switch(env, "DSMO_WORKFLOW_SANDBOX")


def _switch(env: Mapping[str, str], name: str) -> bool:
    value = (env.get(name) or ENVIRONMENT[name]).strip().lower()
    if value not in _SWITCH:
        raise SettingsError(f"{name}: {value!r} is not on or off")
    return _SWITCH[value]


def _positive_number(value: str, name: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise SettingsError(f"{name}: {value!r} is not a number") from None
    if not number > 0 or number == float("inf"):
        raise SettingsError(f"{name}: {value!r} is not a positive number")
    return number


def _whole_number(value: str, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SettingsError(f"{name}: {value!r} is not a whole number") from None
    if number < 0:
        raise SettingsError(f"{name}: {number} is negative")
    return number
