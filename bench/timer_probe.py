"""How late the Temporal server under the bench fires a short workflow timer.

A DSMO stage's retry back-off is a workflow timer (`workflow.sleep`), so the server's timer
precision decides how soon a retry starts. The probe sleeps for the back-off the bench's stages
ask for and reads how long the sleep took in the workflow's own (server-stamped) time.
"""

from __future__ import annotations

import statistics
import uuid
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client

PROBES = 5


@workflow.defn
class TimerProbe:
    """Sleeps ``seconds`` and returns how long the sleep lasted in workflow time."""

    @workflow.run
    async def run(self, seconds: float) -> float:
        began = workflow.now()
        await workflow.sleep(timedelta(seconds=seconds))
        return (workflow.now() - began).total_seconds()


async def timer_fires(client: Client, task_queue: str, seconds: float) -> dict[str, Any]:
    """The median time a ``seconds`` timer took to fire over `PROBES` workflows, one at a time."""
    fired = [
        await client.execute_workflow(
            TimerProbe.run, seconds, id=f"timer-probe-{uuid.uuid4().hex}", task_queue=task_queue
        )
        for _ in range(PROBES)
    ]
    return {"asked_s": seconds, "fired_s": statistics.median(fired), "probes": len(fired)}
