"""Table 1's B3 worker: DSMO's worker with the bench agent, as a process a crash point can kill.

    python -m bench.b3_worker --dsn DSN --seed 7 --task-queue Q --slots 4

It builds the worker `dsmo worker` builds (`dsmo.worker.build_worker`: the AgentExecution
workflow and every activity) with two differences the experiment needs: the `bench-stage` agent
(`bench.agents.B3Agent`, logging every execution to the shared log in PostgreSQL at ``--dsn``)
and DSMO's stage activity wrapped by `LostCompletions`, which `dsmo worker --load` cannot do.
At a planned crash point the agent SIGKILLs this process; the bench's supervisor starts another
a second later (`bench.b3_process`). ``--slots`` bounds the activities it runs at once: Table 1's
stage executors, as many as B1's and B2's consumer processes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
from concurrent.futures import ThreadPoolExecutor

from bench.agents import B3Agent, LostCompletions, bench_registry
from bench.queue_db import QueueDb
from dsmo.activities.messaging import FileChannel
from dsmo.activities.stage import StageActivities
from dsmo.client.connection import connect_temporal
from dsmo.config.settings import Settings
from dsmo.runtime import logging_setup
from dsmo.runtime.exits import hard_exit
from dsmo.runtime.heap import freeze_startup_heap
from dsmo.runtime.storage import artifact_store
from dsmo.worker import build_worker


def identity() -> str:
    """The worker's identity as `dsmo worker` forms it (``pid@host``): the bench waits for it to poll."""
    return f"{os.getpid()}@{socket.gethostname()}"


async def serve(dsn: str, seed: int, task_queue: str, slots: int) -> None:
    """Serve ``task_queue`` until SIGTERM (or until a crash point kills the process)."""
    settings = Settings.from_env()
    client = await connect_temporal(settings)
    store = artifact_store(settings, cache=True)
    agent = B3Agent(seed, shared=QueueDb(dsn), consumer=f"dsmo-worker-{os.getpid()}")
    registry = bench_registry(agent)
    stages = StageActivities(store, registry, executor=ThreadPoolExecutor(max_workers=slots))
    worker = build_worker(
        client,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(settings.state_dir / "bench-outbox"),
        registry=registry,
        activity_threads=slots,
        max_concurrent_activities=slots,
        sandboxed=settings.worker.sandbox,
        overrides=[LostCompletions(agent, stages).run_stage],
        identity=identity(),
    )
    freeze_startup_heap()  # as `dsmo worker` does once it is built
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with worker:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.b3_worker")
    parser.add_argument("--dsn", required=True, help="the shared execution log's PostgreSQL")
    parser.add_argument("--seed", type=int, required=True, help="the faults' seed")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--slots", type=int, required=True, help="activities at once (stage executors)")
    args = parser.parse_args()
    logging_setup.install(logging.WARNING)
    asyncio.run(serve(args.dsn, args.seed, args.task_queue, args.slots))
    hard_exit(0)


if __name__ == "__main__":
    main()
