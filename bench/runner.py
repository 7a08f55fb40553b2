"""Run the benchmark: Table 1 (B1-B3 on W1-W4, `experiment.py`), the raw-Temporal floor and resume
latency (`floor.py`), and history size per artifact size. Everything runs against the embedded
stack; B1 and B2 also on the queue server the bench starts (`queue_db.py`). The workers here, in
the bench's process, serve the floor and the timer probe; Table 1's B3 runs on a worker process
of its own that its crash points kill (`b3_process.py`).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from temporalio.worker import Worker

from bench import modes
from bench.agents import B3Agent, ExecutionLog, LostCompletions, bench_registry
from bench.experiment import PaperExperiment
from bench.floor import FloorComparison
from bench.table1 import repetition
from bench.table1_faults import totals
from bench.timer_probe import TimerProbe, timer_fires
from bench.workloads import STAGE_BACKOFF_S, definition, local_definition
from dsmo.activities.messaging import FileChannel
from dsmo.activities.stage import StageActivities
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack
from dsmo.runtime.heap import freeze_startup_heap
from dsmo.runtime.storage import artifact_store
from dsmo.worker import build_worker


@dataclass
class BenchConfig:
    quick: bool = True
    seed: int = 7
    inputs: int = 12
    replays: int = 2
    concurrency: int = 4
    w4_runs: int = 40  # the floor comparison's W4 batch
    # Table 1's W4: inputs (each replayed like W1-W3's), more than run at once: its backpressure
    w4_inputs: int = 30
    w4_concurrency: int = 10
    ambiguity: float = 0.15  # B2: the share of runs in which its agent decides differently
    b2_sweep: tuple[float, ...] = ()  # B2 again at these shares (Table 1's sweep), beside ``ambiguity``
    repetitions: int = 1  # Table 1's whole experiment, each with its own seed
    # Table 1's stage executors, the same in every mode: B1's and B2's consumer processes (one
    # stage at a time each, every one competing for every stage) and B3's worker activity slots.
    executors: int = 4
    # A queue mode's drain ends once nothing has been queued for this long: every redelivery
    # and duplicate chain of its runs has been executed (a stage takes far less).
    drain_quiet: float = 3.0
    scale_runs: int = 200
    migration_runs: int = 300  # waiting runs migrated in one batch (bench/studies/migrate/migration_bench.py)
    what_if_runs: int = 100  # ended runs replayed against a candidate (bench/studies/what_if/what_if_bench.py)
    # Flow control (bench/studies/flow/flow_bench.py): W4 runs a side, keyed and plain, in this many rounds;
    # starts through one lock for this many seconds; runs one key serves in line.
    flow_runs: int = 200
    flow_rounds: int = 2
    flow_seconds: float = 10.0
    flow_handover_runs: int = 50
    artifact_sizes: Sequence[int] = (1_000, 1_000_000, 10_000_000)
    resume_samples: int = 10
    # Against the floor: this many interleaved rounds, each batch at least this many waves of
    # the shape's concurrency. A multiple of the six sides (bench.floor.SIDES), so each runs in
    # each place of a round equally often.
    paired_rounds: int = 6
    paired_waves: int = 2

    @classmethod
    def full(cls) -> BenchConfig:
        # 50 resume samples: with 10, the p50 ratio swung 0.9x-1.6x between full runs.
        return cls(
            quick=False,
            inputs=30,
            replays=3,
            w4_runs=200,
            w4_inputs=100,
            w4_concurrency=50,
            repetitions=3,
            b2_sweep=(0.05, 0.30),
            scale_runs=10_000,
            migration_runs=10_000,
            what_if_runs=1_000,
            flow_runs=1_000,
            flow_rounds=4,
            flow_seconds=30.0,
            flow_handover_runs=200,
            resume_samples=50,
            # With four rounds, consecutive full runs of the same code swung W4 0.63x-0.75x (eight
            # was the value before the local sides); six, a multiple of the six sides, keeps the
            # rotation even at about the floor's earlier cost (36 batches per shape, 32 before).
            paired_rounds=6,
            paired_waves=4,
        )


def no_crash_here() -> None:
    """The in-process agent's crash point: never reached (the floor's runs meet no faults)."""
    raise RuntimeError("a crash drawn in the bench's own process: Table 1's B3 runs on bench.b3_worker")


class Bench(FloorComparison, PaperExperiment):
    """The benchmark on one stack; ``devstack`` is that stack when the bench started it (Table 1
    restarts its Temporal server; None: a running stack, never killed)."""

    def __init__(
        self,
        settings: Settings,
        config: BenchConfig,
        progress: Callable[[str], None] = print,
        devstack: DevStack | None = None,
    ) -> None:
        self.settings = settings
        self.devstack = devstack
        self.config = config
        self.progress = progress
        # As a worker's store: artifacts it writes are served from memory to the next stage.
        self.store = artifact_store(settings, cache=True)
        # As a starter's: DsmoClient writes run inputs through a store of its own, uncached.
        self.starter_store = artifact_store(settings)
        self.log = ExecutionLog()
        self.agent = B3Agent(config.seed, self.log, crash=no_crash_here)
        self.queue = f"bench-{uuid.uuid4().hex[:8]}"

    async def run(self) -> dict[str, Any]:
        results: dict[str, Any] = {"config": {k: v for k, v in vars(self.config).items()}}
        async with self.workers():
            results.update(await self.table1_repeated())
            results.update(await self._against_floor())
            self.progress("history bytes per artifact size")
            results["history_bytes"] = await self.history_bytes()
        return results

    async def table1_repeated(self) -> dict[str, Any]:
        """Table 1's experiment, then again with other seeds (its run-to-run spread), and how soon
        this server fires the stages' retry timer (B3's retry delays follow it). Inside `workers`."""
        workloads = await self.table1(self.progress)
        repetitions, faults = [repetition(workloads)], [totals(workloads)]
        for extra in range(1, self.config.repetitions):
            more = await self.table1(self.progress, seed=self.config.seed + extra)
            repetitions.append(repetition(more))
            faults.append(totals(more))
        timer = await timer_fires(self.dsmo.temporal, self.queue + "-modes", STAGE_BACKOFF_S)
        # faults: per repetition, mode -> processes killed, their deaths, server restarts
        return {"workloads": workloads, "repetitions": repetitions, "timer": timer, "faults": faults}

    async def run_against_floor(self, repeats: int) -> list[dict[str, Any]]:
        """Only the floor comparison and resume latency, ``repeats`` times on the same workers:
        what the targets are judged on, with its spread on this machine."""
        measured = []
        async with self.workers():
            for index in range(repeats):
                self.progress(f"repeat {index + 1} of {repeats}")
                measured.append(await self._against_floor())
        return measured

    async def _against_floor(self) -> dict[str, Any]:
        self.progress("floor")
        floor = await self.floor()
        self.progress("resume latency")
        return {"floor": floor, "resume": await self.resume_latency(self.config.resume_samples)}

    @contextlib.asynccontextmanager
    async def workers(self) -> AsyncIterator[None]:
        """DSMO's worker (B3) and one for the other modes and the floor, both in this process."""
        self.dsmo = await DsmoClient.connect(self.settings)
        client = self.dsmo.temporal
        floor_io = modes.FloorIoActivities(self.store)
        registry = bench_registry(self.agent)
        # DSMO's stage activity, wrapped so that a completion B3's agent drew lost is dropped
        # after the commit. It has its own 32 threads beside the worker's (`dsmo worker` runs
        # stages and its other activities on one pool); a plain stage still takes one trip to them.
        stages = StageActivities(self.store, registry, executor=ThreadPoolExecutor(max_workers=32))
        base = build_worker(
            client,
            task_queue=self.queue,
            store=self.store,
            channel=FileChannel(self.settings.state_dir / "bench-outbox"),
            registry=registry,
            activity_threads=32,
            sandboxed=self.settings.worker.sandbox,
            overrides=[LostCompletions(self.agent, stages).run_stage],
        )
        extra = Worker(
            client,
            task_queue=self.queue + "-modes",
            workflows=[modes.FloorRun, modes.FloorIoRun, modes.FloorWait, TimerProbe],
            activities=[modes.noop, floor_io.stage, floor_io.trail],
            activity_executor=ThreadPoolExecutor(max_workers=32),
            max_concurrent_activities=32,
        )
        # As `dsmo worker` does once it is built: the start-up heap out of the collector's reach,
        # so full collections (and their pauses) cost what they do in production.
        freeze_startup_heap()
        async with base, extra:
            yield

    async def b3_latency(self, workload: str, *, local: bool = False) -> float:
        """One B3 run of ``workload``'s definition, start to result (the floor comparison's B3 side);
        with ``local``, its stages run as local activities (the `b3_local` side)."""
        run_id = f"b3-{uuid.uuid4().hex[:10]}"
        began = time.perf_counter()
        chosen = local_definition(workload) if local else definition(workload)
        await self.dsmo.start(chosen, {"route": "b", "input": "paired"}, run_id=run_id, task_queue=self.queue)
        await self.dsmo.result(run_id)
        return time.perf_counter() - began

    # -- measurements --------------------------------------------------------------------------

    async def _history_bytes(self, run_id: str) -> int:
        described = await self.dsmo.temporal.get_workflow_handle(run_id).describe()
        return int(described.raw_description.workflow_execution_info.history_size_bytes)

    async def history_bytes(self) -> dict[str, int]:
        one_stage = definition("W1").model_copy(
            update={"nodes": {"A": definition("W1").nodes["A"].model_copy(update={"next": None, "input": "{{doc}}"})}}
        )
        sizes: dict[str, int] = {}
        for size in self.config.artifact_sizes:
            items = max(1, size // 30)
            stored = self.store.put_json_once(
                f"bench-inputs/{uuid.uuid4().hex[:8]}/doc-{size:09d}.json", {"route": "b", "items": ["x" * 22] * items}
            )
            run_id = f"bytes-{uuid.uuid4().hex[:10]}"
            await self.dsmo.start(one_stage, {"doc": stored.uri}, run_id=run_id, task_queue=self.queue)
            await self.dsmo.result(run_id)
            sizes[str(size)] = await self._history_bytes(run_id)
        return sizes
