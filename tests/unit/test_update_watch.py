"""A request sent to a run is not awaited for ever once no worker polls the run's queue."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.workflow.v1 import PendingWorkflowTaskInfo, WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse

from dsmo.client import unanswered
from dsmo.client.client_errors import NoWorker
from dsmo.client.unanswered import unless_failing


class Unpolled:
    """Temporal with one open run, healthy, on a queue whose worker has stopped polling."""

    namespace = "default"

    def __init__(self) -> None:
        self.workflow_service = SimpleNamespace(describe_task_queue=self._describe_task_queue)

    async def _describe_task_queue(self, request: Any) -> Any:
        return SimpleNamespace(pollers=[])

    def handle(self) -> Any:
        async def describe() -> Any:
            raw = DescribeWorkflowExecutionResponse(
                workflow_execution_info=WorkflowExecutionInfo(), pending_workflow_task=PendingWorkflowTaskInfo()
            )
            return SimpleNamespace(close_time=None, task_queue="dsmo", raw_description=raw)

        return SimpleNamespace(id="run-1", describe=describe)


async def never() -> None:
    await asyncio.Event().wait()


async def test_a_request_gives_up_once_no_worker_polls_and_says_it_was_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unanswered, "WATCH_FIRST", 0.01)
    temporal = Unpolled()
    with pytest.raises(NoWorker) as gone:
        await asyncio.wait_for(unless_failing(temporal, temporal.handle(), never(), sent="deliver_event"), 5)  # type: ignore[arg-type]
    assert "no worker is polling task queue `dsmo`" in str(gone.value)
    assert "the deliver_event request was sent" in str(gone.value)


async def test_a_wait_for_a_result_outlives_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unanswered, "WATCH_FIRST", 0.01)
    temporal = Unpolled()
    with pytest.raises(TimeoutError):  # still waiting: a run's end may come after its worker's restart
        await asyncio.wait_for(unless_failing(temporal, temporal.handle(), never()), 0.5)  # type: ignore[arg-type]


async def test_an_update_aborted_by_the_run_continuing_as_new_is_sent_again() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from dsmo.client.unanswered import update_run

    sent: list[str] = []

    async def execute_update(name: str, arg: Any, *, result_type: Any) -> str:
        sent.append(name)
        if len(sent) == 1:  # the run continued as new with the update admitted, not taken
            raise RPCError("workflow update was aborted", RPCStatusCode.UNAVAILABLE, b"")
        return "taken"

    handle = SimpleNamespace(id="run-1", execute_update=execute_update)
    answer = await update_run(Unpolled(), handle, "deliver_event", {}, str)  # type: ignore[arg-type]
    assert (answer, sent) == ("taken", ["deliver_event", "deliver_event"])
