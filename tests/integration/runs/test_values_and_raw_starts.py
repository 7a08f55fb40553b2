"""What a new user met first: numbers that changed type, runs started without DSMO's client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import jsonschema
import pytest

from dsmo.activities.audit_log import audit_key
from dsmo.client import monitoring
from dsmo.client.wire_schemas import start_request_schema
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.polling import until_value

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


async def test_an_integer_score_stays_an_integer_end_to_end(harness: Harness) -> None:
    definition = parse_definition(
        {
            "agent": "scored",
            "start": "exam",
            "nodes": {
                "exam": {"actionType": "assign_test", "parameters": {"test": "t1"}, "next": "tell"},
                "tell": {"actionType": "send_message", "parameters": {"message": "score={{testScore}}"}},
            },
        }
    )
    run_id = await harness.start(definition)
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.signal_event(run_id, "TEST_COMPLETED", {"event_id": "t-1", "score": 87, "result": "passed"})
    result = await harness.dsmo.result(run_id)
    assert result.variables["testScore"] == 87 and type(result.variables["testScore"]) is int
    assert [m["message"] for m in harness.messages(run_id) if m.get("message")] == ["score=87"]
    resumed = [e for e in await harness.dsmo.events(run_id) if e.type == "RUN_RESUMED"]
    assert type(resumed[0].data["set"]["testScore"]) is int
    # The exported trail in the store says 87 too.
    lines = harness.store.read_bytes(harness.store.uri(audit_key(run_id))).decode().splitlines()
    exported = [json.loads(line) for line in lines]
    resumed_line = next(e for e in exported if e.get("type") == "RUN_RESUMED")
    assert type(resumed_line["data"]["set"]["testScore"]) is int  # JSON 87, not 87.0


async def test_a_run_started_with_the_official_cli_gets_every_search_attribute(harness: Harness) -> None:
    raw_definition = {
        "agent": "raw-started",
        "start": "ask",
        "nodes": {"ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}},
    }
    request = {"definition": raw_definition, "input": {"who": "outside"}}
    jsonschema.validate(request, start_request_schema())  # the documented shape
    run_id = f"raw-{uuid.uuid4().hex[:8]}"
    harness.started.append(run_id)
    settings = harness.settings
    address = ["--address", settings.temporal.address, "--namespace", settings.temporal.namespace]
    await temporal_cli(
        "workflow", "start", "--type", "AgentExecution", "--task-queue", harness.task_queue,
        "--workflow-id", run_id, "--input", json.dumps(request), *address,
    )  # fmt: skip
    view = await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    version = parse_definition(raw_definition).workflow_version
    assert (view.agent, view.workflow_version) == ("raw-started", version)
    query = f"AgentName='raw-started' AND WorkflowVersion='{version}' AND WaitingFor='response'"
    await until_value(  # visibility is eventually consistent
        lambda: temporal_cli("workflow", "list", "--query", query, "--output", "json", *address),
        lambda listed: run_id in listed,
        f"{run_id} listed by `temporal workflow list`",
    )
    waiting = [row for row in await monitoring.waiting(harness.dsmo.temporal) if row.run_id == run_id]
    assert [row.agent for row in waiting] == ["raw-started"]
    await harness.dsmo.respond(run_id, "hola")
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED


async def temporal_cli(*args: str) -> str:
    proc = await asyncio.to_thread(
        subprocess.run, [str(BIN / "temporal"), *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout
