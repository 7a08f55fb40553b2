from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from dsmo.starter.client.connection import temporal_tls
from dsmo.starter.config.settings import ENVIRONMENT, Settings, SettingsError


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.temporal_address == "127.0.0.1:7233" and settings.temporal_port == 7233
    assert settings.task_queue == "agent-executions"
    assert settings.s3_port == 8333 and settings.ui_port == 8233
    assert settings.run_url("r1") == "http://127.0.0.1:8233/namespaces/default/workflows/r1"
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
    from dsmo.starter.telemetry import setup_tracing

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
    ],
)
def test_hardening_settings_name_the_variable_and_the_reason(name: str, value: str, reason: str) -> None:
    with pytest.raises(SettingsError, match=f"^{name}: .*{reason}"):
        Settings.from_env({name: value})


def test_worker_bounds_come_from_the_environment_with_their_floors() -> None:
    defaults = Settings.from_env({})
    assert (defaults.max_concurrent_activities, defaults.processor_threads) == (16, 16)
    assert defaults.max_concurrent_workflow_tasks == 100  # Temporal's own default
    # Temporal needs two workflow-task slots while workflows are cached; one is raised to two.
    assert Settings.from_env({"DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "1"}).max_concurrent_workflow_tasks == 2
    assert Settings.from_env({"DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "12"}).max_concurrent_workflow_tasks == 12
    with pytest.raises(SettingsError, match="DSMO_MAX_CONCURRENT_WORKFLOW_TASKS"):
        Settings.from_env({"DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "many"})
