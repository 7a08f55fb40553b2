"""Raw Temporal: the W6 graph as a workflow and activities, and its worker process.

The floor: what a Temporal user writes by hand for three stages, a wait for a reply with a
timeout (a signal and ``workflow.wait_condition``), and a send, with the same agents. Started with
``local=True`` (the "temporal-local" contender), the stages and the send are local activities,
as Temporal advises for short activities, and as DSMO runs its short stages by default: what
Temporal itself costs for this graph in the shape DSMO's default run takes.
https://docs.temporal.io/develop/python/message-passing (signals),
https://docs.temporal.io/develop/python/timers (wait_condition with a timeout),
https://docs.temporal.io/local-activity (local activities).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from bench.studies.peers.peer_work import PeerWork
from bench.studies.peers.runner_config import STAGE_SLOTS, RunnerConfig
from dsmo.config.settings import Settings

STAGE_TIMEOUT = timedelta(seconds=5)  # as the DSMO definition's stages


# -- user code begins --
@workflow.defn(name="PeerRun", sandboxed=False)
class PeerRun:
    def __init__(self) -> None:
        self.reply: str | None = None
        self.waits = False

    @workflow.signal
    def answer(self, text: str) -> None:
        self.reply = text

    @workflow.query
    def waiting(self) -> bool:
        return self.waits

    @workflow.run
    async def run(self, run_id: str, input_uri: str, wait_seconds: float, local: bool = False) -> None:
        call = workflow.execute_local_activity if local else workflow.execute_activity
        uri = input_uri
        for stage in ("A", "B", "C"):
            uri = await call(
                "peer_stage", args=[run_id, stage, uri], result_type=str, start_to_close_timeout=STAGE_TIMEOUT
            )
        self.waits = True
        try:
            await workflow.wait_condition(lambda: self.reply is not None, timeout=timedelta(seconds=wait_seconds))
            ended_by = "reply"
        except TimeoutError:
            ended_by = "timeout"
        await call("peer_send", args=[run_id, uri, ended_by], start_to_close_timeout=STAGE_TIMEOUT)


def activities(work: PeerWork) -> list[Callable[..., Any]]:
    @activity.defn(name="peer_stage")
    def stage(run_id: str, stage: str, input_uri: str) -> str:
        return work.stage(run_id, stage, input_uri)

    @activity.defn(name="peer_send")
    def send(run_id: str, input_uri: str, ended_by: str) -> None:
        info = activity.info()  # run id + activity id: the same for every attempt of this activity
        work.send(run_id, input_uri, ended_by, key=f"{info.workflow_run_id}/{info.activity_id}")

    return [stage, send]


# -- user code ends --


async def serve(config: RunnerConfig) -> None:
    settings = Settings.from_env()
    client = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace)
    with ThreadPoolExecutor(max_workers=STAGE_SLOTS) as threads:
        worker = Worker(
            client,
            task_queue=config.task_queue,
            workflows=[PeerRun],
            activities=activities(config.work()),
            activity_executor=threads,
            max_concurrent_activities=STAGE_SLOTS,  # as DSMO's worker: one per processor thread
        )
        await worker.run()


if __name__ == "__main__":
    asyncio.run(serve(RunnerConfig.from_env()))
