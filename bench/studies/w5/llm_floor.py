"""W5's references: the same runs on raw Temporal, without DSMO, to show what the stack allows.

A plain workflow with W5's shape: a step, a wait for the go signal, the model call as an async
activity, a step. The call goes out the way an `llm` stage's does (the same pooled async HTTP
clients). With ``--writes`` the call activity also makes the two store writes an `llm` stage
makes after its answer, the call's record and the output, through a worker's artifact store and
I/O threads; without, nothing but Temporal and the call. No definition, audit, search
attributes after the gate, templates or schema checks.

    python -m bench.studies.w5.llm_floor [--writes]   # a worker on $DSMO_TASK_QUEUE, calls $DSMO_LLM_BASE_URL
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.llm_http import CLIENT_POOLS, new_http_client
from dsmo.config.settings import Settings
from dsmo.runtime.heap import freeze_startup_heap
from dsmo.runtime.storage import artifact_store
from dsmo.workflows.common.search_attributes import WAITING_FOR

WORKFLOW = "LlmFloorRun"
GO_SIGNAL = "MESSAGE_RECEIVED"  # the signal DSMO's runs take, so the bench sends the same one
# What a W5 DSMO worker is given: room for every call of a batch, and as many I/O threads.
ACTIVITY_SLOTS, WORKFLOW_TASK_SLOTS, IO_THREADS = 256, 100, 32
STEP_TIMEOUT, CALL_TIMEOUT = timedelta(seconds=30), timedelta(seconds=120)


@activity.defn(name="floor_step")
async def floor_step() -> None:
    """A step that does nothing: the first and last stages of the shape."""


@workflow.defn(name=WORKFLOW, sandboxed=False)
class LlmFloorRun:
    """Step, wait for the go signal, the model call, step; returns the answer."""

    def __init__(self) -> None:
        self._go = False

    @workflow.run
    async def run(self, text: str) -> dict[str, Any]:
        await workflow.execute_activity(floor_step, start_to_close_timeout=STEP_TIMEOUT)
        # The bench counts the runs at the gate by this attribute, as it counts DSMO's.
        workflow.upsert_search_attributes([WAITING_FOR.value_set("response")])
        await workflow.wait_condition(lambda: self._go)
        answer: dict[str, Any] = await workflow.execute_activity(
            "floor_model_call", text, start_to_close_timeout=CALL_TIMEOUT, result_type=dict
        )
        await workflow.execute_activity(floor_step, start_to_close_timeout=STEP_TIMEOUT)
        return answer

    @workflow.signal(name=GO_SIGNAL)
    def go(self, _event: dict[str, Any]) -> None:
        self._go = True


class FloorModelCall:
    """The model call, and with a store, the two writes an `llm` stage makes after its answer."""

    def __init__(self, base_url: str, store: ArtifactStore | None) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.store = store
        self.clients = [new_http_client() for _ in range(CLIENT_POOLS)]
        self._turn = itertools.count()
        self._io = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="floor-io")

    @activity.defn(name="floor_model_call")
    async def call(self, text: str) -> dict[str, Any]:
        """Ask the model to classify ``text``; its answer is a JSON object."""
        request = {"model": "bench", "messages": [{"role": "user", "content": f"Classify: {text}"}]}
        client = self.clients[next(self._turn) % len(self.clients)]
        response = await client.post(self.url, json=request)
        response.raise_for_status()
        answer: dict[str, Any] = json.loads(response.json()["choices"][0]["message"]["content"])
        if self.store is not None:
            folder = f"artifacts/bench-w5-floor/{activity.info().workflow_id}/"
            record = {"request": request, "response": {"status": response.status_code, "body": response.text}}
            await asyncio.get_running_loop().run_in_executor(self._io, self._commit, folder, record, answer)
        return answer

    def _commit(self, folder: str, record: dict[str, Any], answer: dict[str, Any]) -> None:
        assert self.store is not None
        self.store.put_json_once(f"{folder}llm/1.json", record)
        self.store.put_json_once(f"{folder}output.json", answer)


async def serve(settings: Settings, base_url: str, *, writes: bool) -> None:
    """Run the reference worker on the settings' task queue until cancelled."""
    client = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace)
    call = FloorModelCall(base_url, artifact_store(settings, cache=True) if writes else None)
    freeze_startup_heap()  # as DSMO's worker does, so both meet the same collector
    worker = Worker(
        client,
        task_queue=settings.temporal.task_queue,
        workflows=[LlmFloorRun],
        activities=[floor_step, call.call],
        max_concurrent_activities=ACTIVITY_SLOTS,
        max_concurrent_workflow_tasks=WORKFLOW_TASK_SLOTS,
    )
    await worker.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", action="store_true", help="also write the call's record and the output")
    args = parser.parse_args()
    asyncio.run(serve(Settings.from_env(), os.environ["DSMO_LLM_BASE_URL"], writes=args.writes))


if __name__ == "__main__":
    main()
