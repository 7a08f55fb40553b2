"""DBOS Transact on PostgreSQL: the W6 graph as a workflow of steps, served by a FastAPI app.

DBOS runs inside the application's own process: a workflow's steps are checkpointed in its
system database, ``recv`` waits for a message with a durable timeout, and at launch DBOS
recovers the workflows this executor left unfinished. The app takes starts and replies over
HTTP, as DBOS's FastAPI integration shows.

Idioms followed: ``DBOSConfig`` with ``system_database_url``, a pinned ``executor_id`` and
``application_version`` (recovery is per executor and version;
https://docs.dbos.dev/python/reference/configuration,
https://docs.dbos.dev/production/self-hosting/workflow-recovery); ``@DBOS.workflow`` and
``@DBOS.step`` on ``async def`` (https://docs.dbos.dev/python/reference/decorators);
``SetWorkflowID`` with ``DBOS.start_workflow_async`` (https://docs.dbos.dev/python/reference/contexts);
``DBOS.recv_async`` with ``timeout_seconds`` and ``DBOS.send_async``
(https://docs.dbos.dev/python/tutorials/workflow-communication).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import uvicorn
from dbos import DBOS, DBOSConfig, Queue, SetWorkflowID
from fastapi import FastAPI

from bench.studies.peers.peer_work import PeerWork
from bench.studies.peers.runner_config import STAGE_SLOTS, RunnerConfig


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    # Steps and DBOS's own database calls run on the loop's default executor: as many threads
    # as the other contenders' runners have.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=STAGE_SLOTS))
    DBOS.launch()  # on the server's event loop, where the recovered async workflows then run
    if _config().capped:
        queue = await DBOS.register_queue_async(STAGES, worker_concurrency=STAGE_SLOTS, polling_interval_sec=0.1)
        _stages.append(queue)
    print("ready", flush=True)
    yield
    DBOS.destroy()


app = FastAPI(lifespan=lifespan)


@functools.cache
def _config() -> RunnerConfig:
    return RunnerConfig.from_env()


@functools.cache
def _work() -> PeerWork:
    return _config().work()


# -- user code begins --
@DBOS.step(retries_allowed=True, max_attempts=3)
async def stage(run_id: str, name: str, input_uri: str) -> str:
    return await asyncio.to_thread(_work().stage, run_id, name, input_uri)


@DBOS.step(retries_allowed=True, max_attempts=3)
async def send(run_id: str, input_uri: str, ended_by: str) -> None:
    key = f"{DBOS.workflow_id}/{DBOS.step_id}"  # workflow id + step id: the same when the step runs again
    await asyncio.to_thread(functools.partial(_work().send, run_id, input_uri, ended_by, key=key))


@DBOS.workflow()
async def peer_run(run_id: str, input_uri: str, wait_seconds: float) -> None:
    uri = input_uri
    for name in ("A", "B", "C"):
        uri = await run_stage(run_id, name, uri)
    reply = await DBOS.recv_async("reply", timeout_seconds=wait_seconds)
    await run_send(run_id, uri, "timeout" if reply is None else "reply")


@app.post("/runs/{run_id}")
async def start(run_id: str, input_uri: str) -> dict[str, str]:
    with SetWorkflowID(run_id):  # the same id again returns the run already started
        await DBOS.start_workflow_async(peer_run, run_id, input_uri, _config().wait_seconds)
    return {"run": run_id}


@app.post("/runs/{run_id}/reply")
async def reply(run_id: str) -> dict[str, str]:
    await DBOS.send_async(run_id, "ok", topic="reply", idempotency_key=f"{run_id}-reply")
    return {"run": run_id}


# -- user code ends --


# The crash test's cap on stage executions in flight (what the other runners' slot counts are),
# in DBOS's queue idiom: the workflow enqueues each stage as a child workflow on a queue with a
# `worker_concurrency` and awaits its handle (https://docs.dbos.dev/python/tutorials/queue-tutorial).
# The stages, not the runs, are queued: a run waiting in `recv` holds no slot, as a waiting
# Temporal run holds no activity slot. Registered at launch (`DBOS.register_queue`), polled 10
# times a second (DBOS's default is once).
STAGES = "peer-stages"
_stages: list[Queue] = []  # the registered queue, once launched


@DBOS.workflow()
async def stage_task(run_id: str, name: str, input_uri: str) -> str:
    return await stage(run_id, name, input_uri)


@DBOS.workflow()
async def send_task(run_id: str, input_uri: str, ended_by: str) -> None:
    await send(run_id, input_uri, ended_by)


async def run_stage(run_id: str, name: str, input_uri: str) -> str:
    """A stage as a step of the run, or (capped) as a child workflow on `STAGES`."""
    if not _config().capped:
        return await stage(run_id, name, input_uri)
    handle = await _stages[0].enqueue_async(stage_task, run_id, name, input_uri)
    return await handle.get_result()


async def run_send(run_id: str, input_uri: str, ended_by: str) -> None:
    """The send as a step of the run, or (capped) as a child workflow on `STAGES`."""
    if not _config().capped:
        await send(run_id, input_uri, ended_by)
        return
    handle = await _stages[0].enqueue_async(send_task, run_id, input_uri, ended_by)
    await handle.get_result()


def main() -> None:
    config = _config()
    dbos_config: DBOSConfig = {
        "name": "peers-w6",
        "system_database_url": config.state_dsn,
        "application_version": "peers-w6-1",
        "executor_id": "runner-1",  # the same after a restart, so its workflows are recovered
        "log_level": "WARNING",
    }
    DBOS(config=dbos_config)
    uvicorn.run(app, host="127.0.0.1", port=config.port, log_level="warning")


if __name__ == "__main__":
    main()
