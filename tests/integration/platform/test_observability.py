"""Traces (one connected trace per run), metrics (Prometheus) and payload encryption."""

from __future__ import annotations

import asyncio
import base64
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from dsmo.activities.messaging import FileChannel
from dsmo.client.connection import connect_temporal
from dsmo.client.dsmo_client import DsmoClient
from dsmo.runtime.telemetry import metrics_runtime
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness, definition_from
from tests.stack import free_port_block

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "candidate_screening.yaml"
CANDIDATE = {"candidate": {"name": "Tomás", "phone": "+34 622"}}

_SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_SPANS))
    yield _SPANS


async def test_one_connected_trace_from_start_to_resume(harness: Harness, spans: InMemorySpanExporter) -> None:
    spans.clear()
    dsmo = await DsmoClient.connect(harness.settings)  # with the tracing interceptor
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    async with build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        run_id = (await dsmo.start(definition_from(EXAMPLE), CANDIDATE, task_queue=queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, "sí")  # a separate call, later: it joins the run's trace
        assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    finished = [
        span
        for span in spans.get_finished_spans()
        if span.attributes
        and (span.attributes.get("temporalWorkflowID") == run_id or span.attributes.get("dsmo.run_id") == run_id)
    ]
    names = {span.name for span in finished}
    assert {
        "dsmo.start candidate-screening",
        "StartWorkflow:AgentExecution",
        "RunWorkflow:AgentExecution",
        "RunActivity:run_stage",
        "dsmo.event MESSAGE_RECEIVED",
    } <= names, names
    assert any(name.startswith("HandleUpdate") or name.startswith("ValidateUpdate") for name in names), names
    # One connected trace for the run (status polls are separate reads, with their own traces).
    run_trace = [span for span in finished if "Query" not in span.name]
    assert len({span.context.trace_id for span in run_trace}) == 1
    stage = next(span for span in finished if span.name == "RunActivity:run_stage")
    assert stage.attributes is not None
    assert {key: stage.attributes.get(key) for key in ("dsmo.stage", "dsmo.attempt", "dsmo.agent_version")} == {
        "dsmo.stage": "profile",
        "dsmo.attempt": 1,
        "dsmo.agent_version": "1.0.0",
    }
    assert stage.attributes.get("dsmo.run_id") == run_id and stage.attributes.get("dsmo.idempotency_key")
    assert stage.attributes.get("dsmo.workflow_version") == definition_from(EXAMPLE).workflow_version


async def test_an_event_from_another_process_joins_the_run_trace(
    harness: Harness, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingress is not the starter: it finds the run's trace in the run's memo (one describe)."""
    spans.clear()
    starter = await DsmoClient.connect(harness.settings)
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    async with build_worker(
        starter.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)
    ):
        run_id = (await starter.start(definition_from(EXAMPLE), CANDIDATE, task_queue=queue)).run_id
        await starter.wait_for_status(run_id, {RunStatus.WAITING})
        ingress = await DsmoClient.connect(harness.settings)
        described = _count_describes(monkeypatch)
        await ingress.respond(run_id, "sí")
        assert (await starter.result(run_id)).status is RunStatus.COMPLETED
    assert described == [run_id]
    by_name = {span.name: span for span in spans.get_finished_spans()}
    start, event = by_name["dsmo.start candidate-screening"], by_name["dsmo.event MESSAGE_RECEIVED"]
    assert event.context.trace_id == start.context.trace_id


async def test_without_tracing_an_event_costs_no_extra_round_trip(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No recording tracer: the event's span is a no-op, so the run's trace is not looked up."""
    monkeypatch.setattr("dsmo.client.core.tracing_enabled", lambda: False)
    run_id = await harness.start(definition_from(EXAMPLE), CANDIDATE)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    ingress = DsmoClient(harness.dsmo.temporal, harness.settings)  # knows nothing of the run
    described = _count_describes(monkeypatch)
    ack = await ingress.respond(run_id, "sí")
    assert ack.accepted and described == []
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED


def _count_describes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every describe call from now on, by workflow id."""
    from temporalio.client import WorkflowHandle

    calls: list[str] = []
    original = WorkflowHandle.describe

    async def describe(self: WorkflowHandle[Any, Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(self.id)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(WorkflowHandle, "describe", describe)
    return calls


async def test_worker_metrics_on_prometheus(harness: Harness) -> None:
    port = free_port_block(1)
    client = await connect_temporal(harness.settings, runtime=metrics_runtime(f"127.0.0.1:{port}"))
    dsmo = DsmoClient(client, harness.settings)
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        data = definition_from(EXAMPLE).model_dump(mode="json", by_alias=True, exclude_none=True)
        data["nodes"]["goodbye"]["next"] = "again"  # a second wait keeps the run open for the duplicate
        data["nodes"]["again"] = {"actionType": "wait_for_response"}
        run_id = (await dsmo.start(parse_definition(data), CANDIDATE, task_queue=queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, "sí", event_id="m-1")
        await dsmo.respond(run_id, "sí", event_id="m-1")  # a duplicate, counted
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, "fin", event_id="m-2")
        await dsmo.result(run_id)
        # The worker records its last metrics as it reports the run's last task; read until they show.
        wanted = [
            "dsmo_duplicates_ignored",
            "dsmo_audit_events",
            "dsmo_stage_queue_seconds",
            "dsmo_agent_processing_seconds",
            "temporal_workflow_completed",
            "temporal_activity_execution_latency",
            'type="STAGE_SUCCEEDED"',
        ]
        deadline = asyncio.get_running_loop().time() + 60  # a hang guard only
        while True:
            body = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
            )
            missing = [metric for metric in wanted if metric not in body]
            if not missing or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
    assert not missing, missing


async def test_encrypted_payloads_never_reach_the_server_in_clear(harness: Harness) -> None:
    secret = f"top-secret-{uuid.uuid4().hex}"
    key = base64.b64encode(b"k" * 32).decode()
    settings = harness.settings.with_changes(codec={"keys": f"k1:{key}"})
    dsmo = await DsmoClient.connect(settings)
    queue = f"codec-{uuid.uuid4().hex[:8]}"
    async with build_worker(dsmo.temporal, task_queue=queue, store=harness.store, channel=FileChannel(harness.outbox)):
        run_id = (await dsmo.start(definition_from(EXAMPLE), CANDIDATE, task_queue=queue)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.respond(run_id, secret)
        result = await dsmo.result(run_id)
    assert result.variables["lastResponse"] == secret  # decoded for whoever holds the key
    plain = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace)
    raw = (await plain.get_workflow_handle(run_id).fetch_history()).to_json()
    assert secret not in raw and "Tom\\u00e1s" not in raw and "Tomás" not in raw
    assert "encryption-key-id" in raw or "ZW5jcnlwdGlvbi1rZXktaWQ" in raw  # the key id travels in metadata
    decoded = await dsmo.temporal.get_workflow_handle(run_id).fetch_history()
    assert secret in str(await _decode_all(dsmo, decoded))


async def _decode_all(dsmo: DsmoClient, history: object) -> list[object]:
    codec = dsmo.temporal.data_converter.payload_codec
    assert codec is not None
    payloads = []
    for event in history.events:  # type: ignore[attr-defined]
        attributes = event.workflow_execution_update_accepted_event_attributes
        if attributes.accepted_request.input.args.payloads:
            payloads.extend(await codec.decode(list(attributes.accepted_request.input.args.payloads)))
    return [payload.data.decode(errors="replace") for payload in payloads]
