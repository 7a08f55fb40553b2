"""The scale test's reference: bare Temporal workflows that wait for one update, on their own worker.

Each waits on a condition until its ``reply`` update arrives, which it accepts and returns, as a
DSMO run accepts a reply (`DsmoClient.respond` is an update). No definition, no audit, no search
attributes: what the stack itself allows for the same starts and the same replies.

    python -m bench.studies.scale.scale_floor   # a worker on $DSMO_TASK_QUEUE against $DSMO_TEMPORAL_ADDRESS
"""

from __future__ import annotations

import asyncio
import os

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from dsmo.config.settings import Settings


@workflow.defn(name="ScaleWait", sandboxed=False)
class ScaleWait:
    def __init__(self) -> None:
        self.replied = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.replied)

    @workflow.update
    def reply(self, text: str) -> str:
        self.replied = True
        return text


async def serve() -> None:
    settings = Settings.from_env()
    client = await Client.connect(settings.temporal.address, namespace=settings.temporal.namespace)
    await Worker(client, task_queue=os.environ["DSMO_TASK_QUEUE"], workflows=[ScaleWait]).run()


if __name__ == "__main__":
    asyncio.run(serve())
