"""The live-stream study's two phases: N runs with no reader, then the same N runs followed live.

Both phases run the same agent (`DEFINITION`: a stage that reports its progress, a `delay`, a
second reporting stage; about ten trail events over ten seconds) on a fresh `dsmo worker` process
of their own, in ``readers`` lanes: a lane starts a run, sees it to its end, then starts the
next, so about ``readers`` runs are live at any moment, and in the second phase each of them
has a reader on the ingress (a `dsmo serve` process) from its start to its `end`. A lane of the
first phase waits for the run's result; a lane of the second reads its stream to `end` and then
asks for the result too (at once answered), so the bench's own calls are the same on both sides
and the difference is what the streams cost. Each phase is preceded by one unmeasured run (the
second's followed by one reader): workflow code loaded, connections opened.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from bench.studies.live.live_agents import CHECK, READ
from bench.studies.live.live_processes import PhaseMeter, ingress_process, worker_process
from bench.studies.live.live_readers import OpenStreams, StreamRecord, read_stream
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

DELAY = "8s"
READERS_PER_KEY = 10  # the ingress allows a key 16 streams at once; a closing stream frees its slot late
T = TypeVar("T")


def definition(agent: str, delay: str = DELAY) -> AgentDefinition:
    """The study's agent: read (progress reports), a ``delay``, check (progress reports)."""
    return parse_definition(
        {
            "agent": agent,
            "start": "read",
            "nodes": {
                "read": {"actionType": "run_agent", "agent": READ, "next": "pause"},
                "pause": {"actionType": "delay", "parameters": {"duration": delay}, "next": "check"},
                "check": {"actionType": "run_agent", "agent": CHECK},
            },
        }
    )


async def in_lanes(run_ids: list[str], lanes: int, one: Callable[[str, int], Awaitable[T]]) -> list[T]:
    """``one(run_id, lane)`` for every run id, ``lanes`` at a time: each lane takes the next id
    when its run ends."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for run_id in run_ids:
        queue.put_nowait(run_id)
    done: list[T] = []

    async def lane(index: int) -> None:
        while not queue.empty():
            done.append(await one(queue.get_nowait(), index))

    await asyncio.gather(*(lane(index) for index in range(min(lanes, len(run_ids)))))
    return done


async def _ended(dsmo: DsmoClient, run_id: str) -> float:
    """Wait for the run's result; raises unless it completed. The time it was asked at."""
    result = await dsmo.result(run_id)
    if result.status.value != "completed":
        raise RuntimeError(f"live study: run {run_id} ended {result.status.value}: {result.error_message}")
    return time.time()


async def _quiet_phase(
    settings: Settings, dsmo: DsmoClient, agent: AgentDefinition, run_ids: list[str], lanes: int
) -> dict[str, Any]:
    queue = f"{agent.agent}-quiet"
    async with worker_process(settings, queue) as worker:
        await dsmo.start(agent, {}, run_id=f"{run_ids[0]}-warm", task_queue=queue)
        await _ended(dsmo, f"{run_ids[0]}-warm")
        meter = PhaseMeter(settings, {"worker": worker.pid})

        async def alone(run_id: str, lane: int) -> float:
            await dsmo.start(agent, {}, run_id=run_id, task_queue=queue)
            return await _ended(dsmo, run_id)

        async with meter.measuring():
            await in_lanes(run_ids, lanes, alone)
    return meter.figures()


async def _followed_phase(
    settings: Settings, dsmo: DsmoClient, agent: AgentDefinition, run_ids: list[str], lanes: int
) -> tuple[dict[str, Any], list[StreamRecord], OpenStreams]:
    queue = f"{agent.agent}-followed"
    keys_file = Path(tempfile.mkdtemp(prefix="dsmo-bench-live-")) / "keys.json"
    store = KeyStore(keys_file)
    keys = [store.add(f"reader-{index}", ["read", "start"]) for index in range(math.ceil(lanes / READERS_PER_KEY))]
    streams = OpenStreams()
    limits = httpx.Limits(max_connections=lanes + 10, max_keepalive_connections=lanes + 10)
    async with (
        worker_process(settings, queue) as worker,
        ingress_process(settings, keys_file) as (ingress, url),
        httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=30.0), limits=limits) as client,
    ):

        async def followed(run_id: str, key: str) -> StreamRecord:
            await dsmo.start(agent, {}, run_id=run_id, task_queue=queue)
            record = await read_stream(client, url, key, run_id, streams)
            await _ended(dsmo, run_id)
            return record

        await followed(f"{run_ids[0]}-warm", keys[0])
        streams.peak = 0
        meter = PhaseMeter(settings, {"worker": worker.pid, "ingress": ingress.pid})

        async def one(run_id: str, lane: int) -> StreamRecord:
            # A key for every READERS_PER_KEY lanes: never more streams a key at once than that.
            return await followed(run_id, keys[lane // READERS_PER_KEY])

        async with meter.measuring():
            records = await in_lanes(run_ids, lanes, one)
    return meter.figures(), records, streams


async def live_bench(
    settings: Settings, dsmo: DsmoClient, runs: int, readers: int, delay: str = DELAY
) -> dict[str, Any]:
    """``runs`` runs with no reader, then ``runs`` more followed by ``readers`` SSE readers.

    Args:
        settings: the bench's stack.
        dsmo: a client of it (starts the runs, waits for their results).
        runs: runs a side.
        readers: lanes, so runs live at once; on the followed side, readers.
        delay: the agent's `delay` between its two stages (a duration).

    Returns:
        ``runs``, ``readers``, ``delay``, ``quiet`` and ``followed`` (each phase's ``seconds``,
        ``cpu_s``, ``rss_start_kib`` and ``rss_peak_kib`` by role) and ``streams`` (what the
        readers got: `StreamRecord` each, with ``peak_open``).
    """
    tag = uuid.uuid4().hex[:6]
    agent = definition(f"bench-live-{tag}", delay)
    quiet = await _quiet_phase(settings, dsmo, agent, [f"live-{tag}-quiet-{i}" for i in range(runs)], readers)
    followed, records, streams = await _followed_phase(
        settings, dsmo, agent, [f"live-{tag}-followed-{i}" for i in range(runs)], readers
    )
    return {
        "runs": runs,
        "readers": readers,
        "delay": delay,
        "quiet": quiet,
        "followed": followed,
        "streams": {"records": records, "peak_open": streams.peak},
    }
