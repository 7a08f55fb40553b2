"""Moving a run over HTTP (`POST /executions/{id}/migrate`): the `operate` scope, dry runs, refusals, a move."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.server.ingress.app import create_app
from tests.conftest import Harness
from tests.ingress_server import serving
from tests.migration_versions import V1, V2, history_length, new_agent, published, waiting_run
from tests.polling import until_value

pytestmark = pytest.mark.integration
MAP = {"documents": "papers"}


@dataclass
class Ingress:
    url: str
    keys: dict[str, str]

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-API-Key": self.keys[key]}, timeout=30)


@pytest.fixture
def ingress(harness: Harness, tmp_path: Path) -> Iterator[Ingress]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    store = KeyStore(settings.api_keys_path)
    keys = {"ops": store.add("ops", ["operate", "read"]), "crm": store.add("crm", ["start", "read", "cancel"])}
    with serving(settings) as url:
        yield Ingress(url, keys)


async def post(client: httpx.Client, run_id: str, body: dict[str, Any]) -> httpx.Response:
    return await asyncio.to_thread(client.post, f"/executions/{run_id}/migrate", json=body)


async def test_a_run_moves_over_http_only_with_the_operate_scope(harness: Harness, ingress: Ingress) -> None:
    dsmo, agent = harness.dsmo, new_agent()
    v1 = await published(dsmo, V1, agent)
    v2 = await published(dsmo, V2, agent)
    run_id = await waiting_run(harness, v1)
    ops, crm = ingress.client("ops"), ingress.client("crm")
    move = {"to": "2.0.0", "nodeMap": MAP, "set": {"priority": "high"}, "reason": "typo in the welcome"}

    refused = await post(crm, run_id, move)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == {"code": "forbidden", "message": "key 'crm' lacks the scope 'operate'"}

    history = await history_length(dsmo, run_id)
    dry = await post(ops, run_id, {**move, "dryRun": True})
    assert dry.status_code == 200, dry.text
    assert dry.json() | {"expiring": []} == {
        "runId": run_id,
        "fromVersion": "1.0.0",
        "toVersion": "2.0.0",
        "fromWorkflowVersion": v1.workflow_version,
        "toWorkflowVersion": v2.workflow_version,
        "fromNode": "documents",
        "toNode": "papers",
        "waiting": True,
        "expiring": [],
        "alreadyOnTarget": False,
        "dryRun": True,
    }
    assert await history_length(dsmo, run_id) == history  # a dry run sends nothing to the run
    assert (await dsmo.status(run_id)).workflow_version == v1.workflow_version

    moved = await post(ops, run_id, {**move, "to": v2.workflow_version})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["toWorkflowVersion"], moved.json()["dryRun"]) == (v2.workflow_version, False)
    status = await until_version(ops, run_id, v2.workflow_version)
    assert (status["status"], status["currentNode"], status["waitingFor"]) == ("waiting", "papers", "document")
    [record] = [event for event in await dsmo.events(run_id) if event.type == "RUN_MIGRATED"]
    assert (record.data["requestedBy"], record.data["reason"]) == ("ops", "typo in the welcome")
    assert record.data["nodeMap"] == MAP

    again = await post(ops, run_id, move)  # a retry of a move that happened is not an error
    assert again.status_code == 200, again.text
    assert again.json()["alreadyOnTarget"] is True and "already on 2.0.0" in again.json()["detail"]
    await dsmo.cancel(run_id, reason="test over")


async def until_version(client: httpx.Client, run_id: str, workflow_version: str) -> dict[str, Any]:
    """The run's status over HTTP once its new generation waits on ``workflow_version``."""

    async def view() -> dict[str, Any]:
        return (await asyncio.to_thread(client.get, f"/executions/{run_id}")).json()  # type: ignore[no-any-return]

    return await until_value(
        view,
        lambda body: body.get("workflowVersion") == workflow_version and body.get("status") == "waiting",
        f"{run_id} waits on {workflow_version}",
    )


async def test_refusals_name_the_reason_and_move_nothing(harness: Harness, ingress: Ingress) -> None:
    dsmo, agent = harness.dsmo, new_agent()
    v1 = await published(dsmo, V1, agent)
    await published(dsmo, V2, agent)
    run_id = await waiting_run(harness, v1)
    ops = ingress.client("ops")
    history, trail = await history_length(dsmo, run_id), len(await dsmo.events(run_id))

    async def problem(body: dict[str, Any], status: int, run: str = run_id) -> dict[str, str]:
        answer = await post(ops, run, body)
        assert answer.status_code == status, answer.text
        error: dict[str, str] = answer.json()["error"]
        return error

    refusal = await problem({"to": "2.0.0", "nodeMap": MAP}, 409)
    assert refusal["code"] == "migration_refused" and "variables: version 2.0.0 reads 'priority'" in refusal["message"]
    refusal = await problem({"to": "2.0.0", "set": {"priority": "x"}, "dryRun": True}, 409)
    assert "'documents' has no counterpart in version 2.0.0" in refusal["message"]
    refusal = await problem({"to": "9.9.9"}, 404)
    assert refusal["code"] == "unknown_version" and "no published version '9.9.9'" in refusal["message"]
    assert (await problem({"to": "2.0.0"}, 404, run="no-such-run"))["code"] == "run_not_found"
    unknown = await problem({"to": "2.0.0", "nodeMaps": MAP}, 422)
    assert unknown == {"code": "invalid_body", "message": "nodeMaps: Extra inputs are not permitted"}
    assert await history_length(dsmo, run_id) == history
    assert len(await dsmo.events(run_id)) == trail
    await dsmo.cancel(run_id, reason="test over")


def test_the_route_is_described_in_the_openapi_schema(tmp_path: Path) -> None:
    spec = create_app(Settings(state_dir=tmp_path)).openapi()
    route = spec["paths"]["/executions/{run_id}/migrate"]["post"]
    assert route["summary"] == "Move a run to another published version of its agent"
    body = route["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert set(spec["components"]["schemas"][body]["properties"]) == {
        "to",
        "nodeMap",
        "set",
        "leaveWait",
        "restartTimers",
        "reason",
        "dryRun",
    }
