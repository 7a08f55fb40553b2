from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import TLSConfig

from dsmo.client.connection import temporal_tls
from dsmo.config.codec_settings import CodecSettings
from dsmo.config.ingress_settings import IngressSettings
from dsmo.config.llm_settings import LlmSettings
from dsmo.config.messaging_settings import MessagingSettings
from dsmo.config.settings import ENVIRONMENT, Settings, SettingsError
from dsmo.config.store_settings import StoreSettings
from dsmo.config.temporal_settings import TemporalSettings
from dsmo.config.worker_settings import WorkerSettings

GROUPS: list[Any] = [
    TemporalSettings,
    StoreSettings,
    WorkerSettings,
    IngressSettings,
    MessagingSettings,
    LlmSettings,
    CodecSettings,
]


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.temporal.address == "127.0.0.1:7233" and settings.temporal.port == 7233
    assert settings.temporal.task_queue == "agent-executions"
    assert settings.store.port == 8333 and settings.temporal.ui_port == 8233
    assert settings.temporal.run_url("r1") == "http://127.0.0.1:8233/namespaces/default/workflows/r1"
    assert settings.outbox_dir == settings.state_dir / "outbox"


def test_round_trip_through_the_environment(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "TEMPORAL_ADDRESS": "127.0.0.1:7300",
            "DSMO_STATE_DIR": str(tmp_path),
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000",
            "DSMO_UI_PORT": "9100",
        }
    )
    assert Settings.from_env(settings.to_env()) == settings
    assert set(settings.to_env()) == {name for name in ENVIRONMENT if not name.startswith("TEMPORAL_TLS")}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TEMPORAL_ADDRESS": "localhost"}, "TEMPORAL_ADDRESS: 'localhost' is not a port number"),
        ({"TEMPORAL_ADDRESS": "h:70000"}, "TEMPORAL_ADDRESS: 70000 is outside"),
        ({"DSMO_UI_PORT": "ui"}, "DSMO_UI_PORT"),
        ({"AWS_ENDPOINT_URL_S3": "s3.local:9000"}, "AWS_ENDPOINT_URL_S3"),
        ({"DSMO_WORKFLOW_SANDBOX": "maybe"}, "DSMO_WORKFLOW_SANDBOX: 'maybe' is not on or off"),
        ({"DSMO_ARTIFACT_CACHE_MB": "lots"}, "DSMO_ARTIFACT_CACHE_MB: 'lots' is not a whole number"),
        ({"DSMO_ARTIFACT_CACHE_MB": "-1"}, "DSMO_ARTIFACT_CACHE_MB: -1 is negative"),
        ({"DSMO_RETENTION_ENDED": "soon"}, "DSMO_RETENTION_ENDED: invalid duration 'soon'"),
        (
            {"DSMO_RETENTION_ENDED": "30d", "DSMO_RETENTION_TRAIL": "7d"},
            "DSMO_RETENTION_TRAIL: trail: at least as long",
        ),
        ({"DSMO_RETENTION_SWEEP_EVERY": "5s"}, "DSMO_RETENTION_SWEEP_EVERY: at least 1m"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_tls_for_temporal(tmp_path: Path) -> None:
    cert, key, ca = (tmp_path / name for name in ("c.pem", "k.pem", "ca.pem"))
    for path in (cert, key, ca):
        path.write_bytes(b"-----BEGIN " + path.name.encode() + b"-----")
    assert temporal_tls(Settings.from_env({})) is False
    tls = temporal_tls(
        Settings.from_env(
            {
                "TEMPORAL_TLS_CERT": str(cert),
                "TEMPORAL_TLS_KEY": str(key),
                "TEMPORAL_TLS_CA": str(ca),
                "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
            }
        )
    )
    assert isinstance(tls, TLSConfig) and tls.client_cert is not None and tls.server_root_ca_cert is not None
    assert tls.client_cert.startswith(b"-----BEGIN c.pem") and tls.server_root_ca_cert.endswith(b"ca.pem-----")
    assert tls.domain == "temporal.internal"
    with pytest.raises(SettingsError, match="give both"):
        Settings.from_env({"TEMPORAL_TLS_CERT": str(cert)})
    with pytest.raises(SettingsError, match="TEMPORAL_TLS_CA: cannot read"):
        temporal_tls(Settings.from_env({"TEMPORAL_TLS_CA": str(tmp_path / "missing.pem")}))


def test_an_unknown_trace_exporter_is_a_settings_error() -> None:
    from dsmo.runtime.telemetry import setup_tracing

    with pytest.raises(SettingsError, match="OTEL_TRACES_EXPORTER: 'bogus' is not supported"):
        setup_tracing("dsmo-test", env={"OTEL_TRACES_EXPORTER": "bogus"})
    assert setup_tracing("dsmo-test", env={}) == "none"  # nothing set: no provider, no error


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("DSMO_LOG_CONTENT", "maybe", "is not on or off"),
        ("DSMO_INGRESS_DOCS", "everyone", "is not read, public or off"),
        ("DSMO_INGRESS_EVENTS_PER_SECOND", "0", "is not a positive number"),
        ("DSMO_INGRESS_EVENTS_PER_SECOND", "nan", "is not a positive number"),
        ("DSMO_INGRESS_EVENT_BURST", "-1", "is negative"),
        ("DSMO_INGRESS_HEAD_TIMEOUT", "0", "is not a positive number"),
    ],
)
def test_hardening_settings_name_the_variable_and_the_reason(name: str, value: str, reason: str) -> None:
    with pytest.raises(SettingsError, match=f"^{name}: .*{reason}"):
        Settings.from_env({name: value})


def test_worker_bounds_come_from_the_environment_with_their_floors() -> None:
    defaults = Settings.from_env({})
    assert (defaults.worker.max_concurrent_activities, defaults.worker.processor_threads) == (16, 16)
    assert defaults.worker.max_concurrent_workflow_tasks == 100  # Temporal's own default
    # Temporal needs two workflow-task slots while workflows are cached; one is raised to two.
    assert Settings.from_env({"DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "1"}).worker.max_concurrent_workflow_tasks == 2
    assert Settings.from_env({"DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "12"}).worker.max_concurrent_workflow_tasks == 12
    with pytest.raises(SettingsError, match="DSMO_MAX_CONCURRENT_WORKFLOW_TASKS"):
        Settings.from_env({"DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "many"})
    assert defaults.worker.max_cached_workflows == 1000  # Temporal's own default
    assert Settings.from_env({"DSMO_MAX_CACHED_WORKFLOWS": "0"}).worker.max_cached_workflows == 1


# A value other than the default for every variable DSMO reads, and where each one lands.
EVERY_VARIABLE = {
    "TEMPORAL_ADDRESS": "temporal.internal:7300",
    "TEMPORAL_NAMESPACE": "agents",
    "DSMO_TASK_QUEUE": "q1",
    "DSMO_UI_PORT": "9100",
    "DSMO_UI_URL": "https://ui.internal",
    "TEMPORAL_TLS_CERT": "/pki/c.pem",
    "TEMPORAL_TLS_KEY": "/pki/k.pem",
    "TEMPORAL_TLS_CA": "/pki/ca.pem",
    "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
    "DSMO_NAMESPACE_RETENTION": "90d",
    "AWS_ENDPOINT_URL_S3": "https://s3.internal:9000",
    "AWS_ACCESS_KEY_ID": "id",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_REGION": "eu-west-1",
    "DSMO_ARTIFACT_BUCKET": "bucket",
    "DSMO_ARTIFACT_CACHE_MB": "0",
    "DSMO_SEAWEED_PORT_BASE": "19400",
    "DSMO_LOAD": "acme.plugin",
    "DSMO_MAX_CONCURRENT_ACTIVITIES": "64",
    "DSMO_PROCESSOR_THREADS": "4",
    "DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "50",
    "DSMO_MAX_CACHED_WORKFLOWS": "300",
    "DSMO_WORKFLOW_SANDBOX": "on",
    "DSMO_METRICS_BIND": "off",
    "DSMO_SLOT_HOLDER_CHECK_SECONDS": "5",
    "DSMO_LOG_LEVEL": "warning",
    "DSMO_INGRESS_BIND": "0.0.0.0:8081",
    "DSMO_API_KEYS_FILE": "/keys.json",
    "DSMO_INGRESS_DOCS": "public",
    "DSMO_INGRESS_EVENTS_PER_SECOND": "2.5",
    "DSMO_INGRESS_EVENT_BURST": "5",
    "DSMO_INGRESS_HEAD_TIMEOUT": "3",
    "DSMO_INGRESS_BODY_TIMEOUT": "30",
    "DSMO_INGRESS_STREAM_LIFETIME": "45",
    "DSMO_HOOKS_ALLOW_PRIVATE": "on",
    "DSMO_CHANNEL": "webhook",
    "DSMO_OUTBOX_DIR": "/outbox",
    "DSMO_LOG_CONTENT": "on",
    "DSMO_WEBHOOK_URL": "https://hooks.internal/dsmo",
    "DSMO_WEBHOOK_TOKEN": "token",
    "DSMO_LLM_BASE_URL": "https://llm.internal/v1",
    "DSMO_LLM_MODEL": "big",
    "DSMO_LLM_API_KEY": "sk",
    "DSMO_LLM_MODELS": "fast=small",
    "DSMO_LLM_MAX_RESPONSE_BYTES": "65536",
    "DSMO_MCP_SERVERS": "orders=https://mcp.internal/mcp",
    "DSMO_MCP_HEADERS": '{"orders": {"Authorization": "Bearer t"}}',
    "DSMO_LLM_PRICES": '{"big": {"input": 2.5, "output": 10}}',
    "DSMO_CODEC_KEYS": "k1:AAAA",
    "DSMO_CODEC_KEYS_FILE": "/codec-keys",
    "DSMO_RETENTION_ENDED": "180d",
    "DSMO_RETENTION_TRAIL": "7y",
    "DSMO_RETENTION_SWEEP_EVERY": "15m",
    "DSMO_SUBJECT_KEYS": "s1:AAAA",
    "DSMO_SUBJECT_KEYS_FILE": "/subject-keys",
    "DSMO_STATE_DIR": "/state",
}


def test_each_group_reads_its_own_variables() -> None:
    assert set(EVERY_VARIABLE) == set(ENVIRONMENT)  # the table below covers every variable
    settings = Settings.from_env(EVERY_VARIABLE)
    assert settings.temporal == TemporalSettings(
        address="temporal.internal:7300",
        namespace="agents",
        task_queue="q1",
        ui_port=9100,
        ui_url_override="https://ui.internal",
        tls_cert="/pki/c.pem",
        tls_key="/pki/k.pem",
        tls_ca="/pki/ca.pem",
        tls_server_name="temporal.internal",
        namespace_retention="90d",
    )
    assert settings.store == StoreSettings(
        endpoint="https://s3.internal:9000",
        access_key="id",
        secret_key="secret",
        region="eu-west-1",
        bucket="bucket",
        cache_mb=0,
        seaweed_port_base=19400,
        retention_ended="180d",
        retention_trail="7y",
        sweep_every="15m",
    )
    assert settings.worker == WorkerSettings(
        load="acme.plugin",
        max_concurrent_activities=64,
        processor_threads=4,
        max_concurrent_workflow_tasks=50,
        max_cached_workflows=300,
        sandbox=True,
        metrics_bind="",
        slot_holder_check_seconds=5,
        hooks_allow_private=True,
        log_level="warning",
    )
    assert settings.ingress == IngressSettings(
        bind="0.0.0.0:8081",
        api_keys_file="/keys.json",
        docs="public",
        events_per_second=2.5,
        event_burst=5,
        head_timeout=3.0,
        body_timeout=30.0,
        stream_lifetime=45.0,
    )
    assert settings.messaging == MessagingSettings(
        channel="webhook",
        outbox_dir_override="/outbox",
        log_content=True,
        webhook_url="https://hooks.internal/dsmo",
        webhook_token="token",
    )
    assert settings.llm == LlmSettings(
        base_url="https://llm.internal/v1",
        model="big",
        api_key="sk",
        models="fast=small",
        max_response_bytes=65536,
        mcp_servers="orders=https://mcp.internal/mcp",
        mcp_headers='{"orders": {"Authorization": "Bearer t"}}',
        prices='{"big": {"input": 2.5, "output": 10}}',
    )
    assert settings.llm.mcp == {"orders": ("https://mcp.internal/mcp", {"Authorization": "Bearer t"})}
    spawned = LlmSettings.from_env({"DSMO_MCP_SERVERS": "files=stdio:npx -y files-mcp,orders=https://o/mcp"})
    assert spawned.mcp == {"files": ("stdio:npx -y files-mcp", {}), "orders": ("https://o/mcp", {})}
    assert settings.codec == CodecSettings(
        keys="k1:AAAA", keys_file="/codec-keys", subject_keys="s1:AAAA", subject_keys_file="/subject-keys"
    )
    assert settings.state_dir == Path("/state")
    # The paths that default under the state folder, and the values derived from a group.
    assert (settings.outbox_dir, settings.api_keys_path) == (Path("/outbox"), Path("/keys.json"))
    assert (settings.temporal.host, settings.temporal.port, settings.store.port) == ("temporal.internal", 7300, 9000)
    assert settings.temporal.run_url("r1") == "https://ui.internal/namespaces/agents/workflows/r1"
    assert settings.llm.aliases == {"fast": "small"}
    assert Settings.from_env(settings.to_env()) == settings
    assert settings.to_env() == EVERY_VARIABLE


@pytest.mark.parametrize("group", GROUPS, ids=lambda group: group.__name__)
def test_a_group_reads_only_its_variables_and_defaults_to_its_table(group: Any) -> None:
    assert group() == group.from_env({}) == group.from_env(group.VARIABLES)
    mine = {name: value for name, value in EVERY_VARIABLE.items() if name in group.VARIABLES}
    others = {name: value for name, value in EVERY_VARIABLE.items() if name not in group.VARIABLES}
    assert group.from_env(others) == group()  # another group's variables do not change this one
    assert group.from_env(EVERY_VARIABLE) == group.from_env(mine) != group()
    assert set(group.from_env(mine).to_env()) == set(mine)


def test_every_variable_belongs_to_one_group_or_to_settings_itself() -> None:
    owners = [name for group in GROUPS for name in group.VARIABLES]
    assert len(owners) == len(set(owners)), "a variable is read by two groups"
    assert set(ENVIRONMENT) - set(owners) == {"DSMO_STATE_DIR"}
    assert Settings() == Settings.from_env({})


@pytest.mark.parametrize("group", GROUPS, ids=lambda group: group.__name__)
def test_a_group_documents_its_fields_and_the_variables_they_come_from(group: Any) -> None:
    doc = inspect.getdoc(group) or ""
    assert not [field.name for field in dataclasses.fields(group) if f"{field.name}:" not in doc]
    assert not [name for name in group.VARIABLES if f"``{name}``" not in doc]


@pytest.mark.parametrize(
    ("group", "name", "value", "message"),
    [
        (TemporalSettings, "DSMO_UI_PORT", "0", "DSMO_UI_PORT: 0 is outside 1-65535"),
        (TemporalSettings, "TEMPORAL_TLS_KEY", "/k.pem", "TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY: give both"),
        (StoreSettings, "DSMO_SEAWEED_PORT_BASE", "base", "DSMO_SEAWEED_PORT_BASE: 'base' is not a port number"),
        (StoreSettings, "AWS_ENDPOINT_URL_S3", "ftp://s3", "AWS_ENDPOINT_URL_S3: 'ftp://s3' is not an http"),
        (WorkerSettings, "DSMO_PROCESSOR_THREADS", "-2", "DSMO_PROCESSOR_THREADS: -2 is negative"),
        (WorkerSettings, "DSMO_MAX_CONCURRENT_ACTIVITIES", "x", "DSMO_MAX_CONCURRENT_ACTIVITIES: 'x' is not a whole"),
        (WorkerSettings, "DSMO_LOG_LEVEL", "loud", "DSMO_LOG_LEVEL: 'loud' is not one of debug, info, warning, error"),
        (IngressSettings, "DSMO_INGRESS_EVENTS_PER_SECOND", "inf", "DSMO_INGRESS_EVENTS_PER_SECOND: 'inf' is not a"),
        (MessagingSettings, "DSMO_CHANNEL", "no such", "DSMO_CHANNEL: 'no such' is not a channel name"),
        (MessagingSettings, "DSMO_CHANNEL", "webhook", "DSMO_WEBHOOK_URL: required when DSMO_CHANNEL=webhook"),
        (LlmSettings, "DSMO_LLM_MODELS", "=big", "DSMO_LLM_MODELS: '=big' is not alias=model"),
        (LlmSettings, "DSMO_MCP_SERVERS", "orders=ftp://x", "DSMO_MCP_SERVERS: 'orders=ftp://x' is not name=http"),
        (LlmSettings, "DSMO_MCP_SERVERS", "files=stdio: ", "DSMO_MCP_SERVERS: 'files=stdio:' is not name=http"),
        (LlmSettings, "DSMO_MCP_SERVERS", "a=http://x,a=http://y", "DSMO_MCP_SERVERS: 'a' is named twice"),
        (LlmSettings, "DSMO_MCP_HEADERS", "[1]", "DSMO_MCP_HEADERS: not a JSON object"),
    ],
)
def test_a_bad_value_names_its_variable_from_its_group(group: Any, name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=f"^{message}") as raised:
        group.from_env({name: value})
    assert "\n" not in str(raised.value)  # one line
    with pytest.raises(SettingsError, match=f"^{message}"):
        Settings.from_env({name: value})


def test_with_changes_replaces_fields_of_a_group_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = Settings.from_env({"TEMPORAL_NAMESPACE": "agents"})
    changed = settings.with_changes(temporal={"task_queue": "q2"}, worker={"metrics_bind": ""}, state_dir=tmp_path)
    assert changed.temporal == TemporalSettings(namespace="agents", task_queue="q2")
    assert changed.worker.metrics_bind == "" and changed.state_dir == tmp_path
    assert (changed.store, changed.llm) == (settings.store, settings.llm)
    assert settings.temporal.task_queue == "agent-executions"  # the original is unchanged
    assert Settings.from_env(changed.to_env()) == changed
    assert changed.with_changes(codec=CodecSettings(keys="k1:AAAA")).codec.keys == "k1:AAAA"  # a whole group
    with pytest.raises(TypeError, match="task_queue"):
        settings.with_changes(store={"task_queue": "q2"})
    with pytest.raises(TypeError, match="task_queue"):
        settings.with_changes(task_queue="q2")  # type: ignore[call-arg]  # a group's field, not a group


def test_the_worker_log_level_takes_any_case_and_defaults_to_info() -> None:
    assert WorkerSettings.from_env({}).log_level == "info"
    assert WorkerSettings.from_env({"DSMO_LOG_LEVEL": " Debug "}).log_level == "debug"
