"""Calling a registered agent directly, as a stage would, without a worker: for users' unit tests."""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime
from typing import Any

from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry, as_output, default_registry
from dsmo.workflows.contracts.activity_io import StageMessage


def call_agent(
    name: str,
    document: dict[str, Any],
    *,
    version: str | None = None,
    run_id: str = "local-run",
    stage: str = "local",
    attempt: int = 1,
    registry: ProcessorRegistry | None = None,
) -> ProcessorOutput:
    """Run the agent registered as ``name`` on ``document``, with its schemas checked as in a run.

    The agent gets a stage message like a worker's (its artifact URIs are placeholders, nothing is
    read or written). An ``async def`` agent is awaited on a fresh event loop, so call this from
    synchronous code such as a plain pytest test.

    Args:
        name: The agent's registered name.
        document: The input document.
        version: The version to call (default: the latest registered).
        run_id: The run id the message carries.
        stage: The stage name the message carries.
        attempt: The attempt number the message carries.
        registry: Where to look the agent up (default: the one `dsmo.agent` registers into).

    Returns:
        The output document and summary, checked against the agent's declared schemas.

    Raises:
        UnknownAgent: No agent is registered under that name (or version).
        ContractViolation: The input, the output or the summary breaks the agent's contract.
        RuntimeError: Called from a running event loop.
    """
    processor = (registry or default_registry).get(name, version)
    processor.check_input(document)
    message = StageMessage(
        run_id=run_id,
        correlation_id=run_id,
        stage=stage,
        workflow_version="0" * 12,
        agent_version=processor.version,
        artifact_in_uri=f"local://{run_id}/{stage}/input.json",
        artifact_out_uri=f"local://{run_id}/{stage}/attempt={attempt}/output.json",
        idempotency_key=f"{run_id}:{stage}",
        attempt=attempt,
        created_at=datetime.now(UTC),
    )
    if processor.is_async and _loop_running():
        raise RuntimeError(f"call_agent runs async agent {name} on its own event loop; call it from synchronous code")
    result = processor.fn(document, message)
    if inspect.isawaitable(result):
        result = asyncio.run(_awaited(result))
    output = as_output(result, agent=name)
    processor.check_result(output)
    return output


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
