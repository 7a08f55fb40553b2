"""LangGraph with its PostgreSQL checkpointer: the W6 graph, and the runner a LangGraph user builds.

LangGraph keeps a thread's state between steps but runs nothing by itself: something must start
threads, deliver replies, fire timeouts and pick threads up again after a crash. This runner is
that something, built as the source documents' system was: a job table in PostgreSQL (start,
reply, timeout), a runner that takes jobs with ``FOR UPDATE SKIP LOCKED`` (woken by
``LISTEN/NOTIFY``, and polling for due timeouts), and the timeout scheduled as a job due later.
One runner per deployment here: at start it takes back every job a dead runner held.

LangGraph idioms followed: ``interrupt`` and ``Command(resume=...)`` for the reply
(https://docs.langchain.com/oss/python/langgraph/interrupts); ``AsyncPostgresSaver`` over a
pool with autocommit and ``dict_row`` (https://pypi.org/project/langgraph-checkpoint-postgres/);
``durability="sync"``, so a step's checkpoint is written before the next step starts
(https://docs.langchain.com/oss/python/langgraph/durable-execution); a ``RetryPolicy`` on the
nodes that do work (https://reference.langchain.com/python/langgraph/types/RetryPolicy); a thread interrupted by a
crash resumed by invoking it with ``None`` (the node that was running runs again). Side effects
sit in their own nodes, before the node that interrupts, because that node runs again on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench.studies.peers.peer_work import PeerWork
from bench.studies.peers.runner_config import STAGE_SLOTS, RunnerConfig

log = logging.getLogger("langgraph-runner")

JOBS = """
CREATE TABLE IF NOT EXISTS lg_jobs (
    id bigserial PRIMARY KEY, thread_id text NOT NULL, kind text NOT NULL, payload jsonb NOT NULL DEFAULT '{}',
    due_at timestamptz NOT NULL DEFAULT now(), claimed_by text, done boolean NOT NULL DEFAULT false,
    failed boolean NOT NULL DEFAULT false);
CREATE INDEX IF NOT EXISTS lg_jobs_ready ON lg_jobs (done, due_at);
CREATE INDEX IF NOT EXISTS lg_jobs_thread ON lg_jobs (thread_id, id);
"""
CHANNEL = "lg_jobs"
SLOTS = 50  # jobs run at once, as the other contenders' 50 concurrent runs (the crash test: STAGE_SLOTS)
POLL_S = 0.2  # how often due timeouts are looked for between notifications


def enqueue(
    conn: psycopg.Connection[Any], thread_id: str, kind: str, payload: dict[str, Any], delay_s: float = 0
) -> None:
    """Add a job (what the driver calls to start a run or deliver a reply)."""
    conn.execute(
        "INSERT INTO lg_jobs (thread_id, kind, payload, due_at) VALUES (%s, %s, %s, now() + make_interval(secs => %s))",
        (thread_id, kind, json.dumps(payload), delay_s),
    )
    conn.execute(f"NOTIFY {CHANNEL}")


# -- user code begins --
class State(TypedDict, total=False):
    uri: str
    ended_by: str


def build_graph(work: PeerWork, jobs_dsn: str, wait_seconds: float) -> StateGraph[State]:
    local = threading.local()

    def jobs() -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(local, "conn", None)
        if conn is None or conn.closed:
            conn = local.conn = psycopg.connect(jobs_dsn, autocommit=True)
        return conn

    def stage(name: str) -> Any:
        def node(state: State, config: RunnableConfig) -> State:
            return {"uri": work.stage(config["configurable"]["thread_id"], name, state["uri"])}

        return node

    def schedule_timeout(state: State, config: RunnableConfig) -> State:
        # A job due when the wait's time is up; it resumes the thread unless a reply did first.
        enqueue(jobs(), config["configurable"]["thread_id"], "timeout", {}, wait_seconds)
        return {}

    def wait_for_reply(state: State) -> State:
        return {"ended_by": interrupt("reply?")}

    def send(state: State, config: RunnableConfig) -> State:
        thread_id = config["configurable"]["thread_id"]
        work.send(thread_id, state["uri"], state["ended_by"], key=f"{thread_id}/send")  # thread id + node
        return {}

    graph = StateGraph(State)
    retry = RetryPolicy(max_attempts=3)  # a failed stage is retried, as the other contenders do
    for name in ("A", "B", "C"):
        graph.add_node(name, stage(name), retry_policy=retry)
    graph.add_node("schedule_timeout", schedule_timeout, retry_policy=retry)
    graph.add_node("wait_for_reply", wait_for_reply)
    graph.add_node("send", send, retry_policy=retry)
    graph.add_edge(START, "A")
    graph.add_edge("A", "B")
    graph.add_edge("B", "C")
    graph.add_edge("C", "schedule_timeout")
    graph.add_edge("schedule_timeout", "wait_for_reply")
    graph.add_edge("wait_for_reply", "send")
    graph.add_edge("send", END)
    return graph


async def run_job(graph: Any, thread_id: str, kind: str, payload: dict[str, Any]) -> None:
    """One job: start a thread, resume it with a reply or a timeout, or pick it up after a crash."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    snapshot = await graph.aget_state(config)
    if snapshot.created_at is None:
        if kind == "start":
            await graph.ainvoke({"uri": payload["uri"]}, config, durability="sync")
        return
    if not snapshot.interrupts:
        # A crash stopped it between steps (even right after its input was saved): go on from
        # its last checkpoint. A thread that has ended runs nothing.
        await graph.ainvoke(None, config, durability="sync")
        snapshot = await graph.aget_state(config)
    if kind in ("reply", "timeout") and snapshot.interrupts:
        await graph.ainvoke(Command(resume=kind), config, durability="sync")


# -- user code ends --


class Runner:
    """Takes jobs from the table and runs them, up to `SLOTS` at once (`STAGE_SLOTS` when capped).

    A job runs one node at a time, so its slots bound the stage executions in flight as the
    other contenders' activity slots or queue do.
    """

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.slots = STAGE_SLOTS if config.capped else SLOTS
        self.identity = uuid.uuid4().hex[:8]
        self.wake = asyncio.Event()
        self.running: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        dsn = self.config.state_dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(JOBS)
            # The only runner: whatever a dead one held is ours to run again.
            conn.execute("UPDATE lg_jobs SET claimed_by = NULL WHERE NOT done AND claimed_by IS NOT NULL")
        pool_kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        # A connection for every job that may run at once, and a few for claims and marks, so
        # no job waits for a connection another job holds.
        async with AsyncConnectionPool(
            dsn,
            min_size=2,
            max_size=self.slots + 5,
            kwargs=pool_kwargs,
            check=AsyncConnectionPool.check_connection,
            open=False,
        ) as pool:
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            graph = build_graph(self.config.work(), dsn, self.config.wait_seconds).compile(checkpointer=saver)
            listener = asyncio.create_task(self._listen())
            print("ready", flush=True)
            try:
                await self._take_jobs(pool, graph)
            finally:
                listener.cancel()

    async def _listen(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.config.state_dsn, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    async for _ in conn.notifies():
                        self.wake.set()
            except psycopg.OperationalError:  # the database restarted: listen again
                await asyncio.sleep(0.5)

    async def _take_jobs(self, pool: AsyncConnectionPool[Any], graph: Any) -> None:
        while True:
            free = self.slots - len(self.running)
            self.wake.clear()  # before claiming: a job added meanwhile wakes the next round
            jobs = await self._claim(pool, free) if free else []
            for job in jobs:
                task = asyncio.create_task(self._run(pool, graph, job))
                self.running.add(task)
                task.add_done_callback(self._finished)
            if not free or len(jobs) < free:  # all slots busy, or nothing more to take: wait
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), POLL_S)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        self.wake.set()  # a thread's next job may now be taken

    async def _claim(self, pool: AsyncConnectionPool[Any], limit: int) -> list[dict[str, Any]]:
        try:
            async with pool.connection() as conn:
                cursor = await conn.execute(
                    """
                    UPDATE lg_jobs SET claimed_by = %s WHERE id IN (
                        SELECT j.id FROM lg_jobs j
                        WHERE NOT j.done AND j.claimed_by IS NULL AND j.due_at <= now()
                          -- one job per thread at a time, in the order they were added
                          AND NOT EXISTS (SELECT 1 FROM lg_jobs e WHERE e.thread_id = j.thread_id AND NOT e.done
                                          AND e.id <> j.id
                                          AND (e.claimed_by IS NOT NULL OR (e.id < j.id AND e.due_at <= now())))
                        ORDER BY j.id LIMIT %s FOR UPDATE SKIP LOCKED)
                    RETURNING id, thread_id, kind, payload
                    """,
                    (self.identity, limit),
                )
                return list(await cursor.fetchall())
        except psycopg.OperationalError:  # the database is restarting
            await asyncio.sleep(0.5)
            return []

    async def _run(self, pool: AsyncConnectionPool[Any], graph: Any, job: dict[str, Any]) -> None:
        while True:
            try:
                await run_job(graph, job["thread_id"], job["kind"], job["payload"])
                async with pool.connection() as conn:
                    await conn.execute("UPDATE lg_jobs SET done = true WHERE id = %s", (job["id"],))
                return
            except psycopg.OperationalError as err:  # the database went away mid-job: run it again
                log.warning("job %s: %s; running it again", job["id"], err)
                await asyncio.sleep(0.5)
            except Exception:  # the graph raised (its retries spent): the job and its run have failed
                log.exception("job %s failed", job["id"])
                async with pool.connection() as conn:
                    await conn.execute("UPDATE lg_jobs SET done = true, failed = true WHERE id = %s", (job["id"],))
                return


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    loop = asyncio.new_event_loop()
    # Sync nodes run on the loop's default executor: as many threads as the other runners have.
    loop.set_default_executor(ThreadPoolExecutor(max_workers=STAGE_SLOTS))
    loop.add_signal_handler(signal.SIGTERM, os._exit, 0)  # jobs are durable: nothing to flush
    loop.run_until_complete(Runner(RunnerConfig.from_env()).serve())


if __name__ == "__main__":
    main()
