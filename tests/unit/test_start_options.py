"""What a DSMO starter decides before a run starts: its first status, and whether to trace."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from temporalio.contrib.opentelemetry import TracingInterceptor

from dsmo.client import starts
from dsmo.runtime import telemetry
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.activity_io import PreparedRun
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.model import parse_definition

PREPARED = PreparedRun(input_uri="s3://b/artifacts/v/r/input.json", config_ref="s3://b/configs/v.json")


def request(*, rate_limit: bool = False, prepared: bool = True) -> ExecutionRequest:
    nodes = {"hello": {"actionType": "send_message", "parameters": {"message": "hi"}}}
    data = {"agent": "starter-check", "start": "hello", "nodes": nodes}
    if rate_limit:
        data["rateLimit"] = {"maxConcurrent": 2}
    return ExecutionRequest(definition=parse_definition(data), prepared=PREPARED if prepared else None)


@pytest.mark.parametrize(
    ("run", "delay", "status"),
    [
        (request(), None, RunStatus.RUNNING),  # prepared, now, unthrottled: running from its start
        (request(), timedelta(0), RunStatus.RUNNING),
        (request(), timedelta(minutes=10), RunStatus.PENDING),  # scheduled for later
        (request(rate_limit=True), None, RunStatus.PENDING),  # may queue behind its agent's limit
        (request(prepared=False), None, RunStatus.PENDING),  # its workflow prepares it first
    ],
    ids=["immediate", "zero-delay", "delayed", "rate-limited", "unprepared"],
)
def test_start_status(run: ExecutionRequest, delay: timedelta | None, status: RunStatus) -> None:
    assert starts._start_status(run, delay) is status


def test_no_tracing_interceptor_without_a_recording_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    assert telemetry.tracing_interceptors() == []


def test_tracing_interceptor_once_a_tracer_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", TracerProvider)
    interceptors = telemetry.tracing_interceptors()
    assert len(interceptors) == 1 and isinstance(interceptors[0], TracingInterceptor)
