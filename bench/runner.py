"""Run the benchmark: modes B1-B3 on W1-W4, the raw-Temporal floor, resume latency, history size
per artifact size, and the scale test. Everything runs against the embedded stack.

Longer than most modules because `Bench` is one class (a class stays in one module) holding the
stack, the worker and the results every measurement shares; the floor comparison is in `floor.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from temporalio.worker import Worker

from bench import modes
from bench.agents import ExecutionLog, Faults, bench_registry
from bench.floor import FloorComparison
from bench.jobs import bounded
from bench.metrics import RunRecord, summarize
from bench.workloads import definition
from dsmo.activities.audit_log import audit_key
from dsmo.activities.messaging import FileChannel
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.starter.settings import Settings
from dsmo.starter.storage import artifact_store
from dsmo.worker import build_worker
from dsmo.workflows.status import RunStatus


def faults_for(workload: str, seed: int) -> Faults:
    """W3 injects timeouts, transient failures and a few permanent ones in B and C."""
    if workload == "W3":
        return Faults(seed=seed, timeout_rate=0.04, transient_rate=0.10, permanent_rate=0.02)
    return Faults(seed=seed)


@dataclass
class BenchConfig:
    quick: bool = True
    seed: int = 7
    inputs: int = 12
    replays: int = 2
    concurrency: int = 4
    w4_runs: int = 40
    w4_concurrency: int = 20
    ambiguity: float = 0.15
    scale_runs: int = 200
    artifact_sizes: Sequence[int] = (1_000, 1_000_000, 10_000_000)
    resume_samples: int = 10
    # Against the floor: this many interleaved rounds, each batch at least this many waves of
    # the shape's concurrency.
    paired_rounds: int = 4
    paired_waves: int = 2

    @classmethod
    def full(cls) -> BenchConfig:
        # 50 resume samples: with 10, the p50 ratio swung 0.9x-1.6x between full runs.
        return cls(
            quick=False,
            inputs=30,
            replays=3,
            w4_runs=200,
            w4_concurrency=50,
            scale_runs=10_000,
            resume_samples=50,
            # Six rounds: with four, consecutive full runs of the same code swung W4 0.63x-0.75x.
            paired_rounds=6,
            paired_waves=4,
        )


@dataclass
class FaultSwitch:
    """The faults in force; swapped per workload while one worker serves the whole bench."""

    current: Faults = field(default_factory=Faults)

    def draw(self, run_id: str, stage: str, attempt: int) -> str | None:
        return self.current.draw(run_id, stage, attempt)

    @property
    def seed(self) -> int:
        return self.current.seed


@dataclass
class Executed:
    """One run as the timed phase saw it; ``outcome`` is the mode's own result."""

    run_id: str
    input_id: str
    replay: bool
    latency_s: float
    outcome: Any

    def record(self, **measured: Any) -> RunRecord:
        return RunRecord(self.run_id, self.input_id, self.replay, latency_s=self.latency_s, **measured)


class Bench(FloorComparison):
    def __init__(self, settings: Settings, config: BenchConfig, progress: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.config = config
        self.progress = progress
        # As a worker's store: artifacts it writes are served from memory to the next stage.
        self.store = artifact_store(settings, cache=True)
        # As a starter's: DsmoClient writes run inputs through a store of its own, uncached.
        self.starter_store = artifact_store(settings)
        self.log = ExecutionLog()
        self.faults = FaultSwitch()
        self.queue = f"bench-{uuid.uuid4().hex[:8]}"
        self.done: dict[str, tuple[float, bool]] = {}
        self.rng = random.Random(config.seed)

    async def run(self) -> dict[str, Any]:
        results: dict[str, Any] = {"config": {k: v for k, v in vars(self.config).items()}, "workloads": {}}
        async with self.workers():
            for workload in ("W1", "W2", "W3", "W4"):
                self.faults.current = faults_for(workload, self.config.seed)
                results["workloads"][workload] = {}
                for mode in ("B3", "B1", "B2"):
                    self.progress(f"{workload} {mode}")
                    records, wall = await self.run_mode(mode, workload)
                    results["workloads"][workload][mode] = {
                        "summary": summarize(records, wall),
                        "latencies": [r.latency_s for r in records],
                    }
            self.faults.current = Faults(seed=self.config.seed)
            results.update(await self._against_floor())
            self.progress("history bytes per artifact size")
            results["history_bytes"] = await self.history_bytes()
        return results

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
        self.choreo = modes.ChoreoActivities(client, self.queue, self.faults, self.log, self.done, store=self.store)
        decide = modes.DecideActivities(self.faults, self.log, store=self.store)
        floor_io = modes.FloorIoActivities(self.store)
        base = build_worker(
            client,
            task_queue=self.queue,
            store=self.store,
            channel=FileChannel(self.settings.state_dir / "bench-outbox"),
            registry=bench_registry(self.faults, self.log),
            activity_threads=32,
            sandboxed=self.settings.workflow_sandbox,
        )
        extra = Worker(
            client,
            task_queue=self.queue + "-modes",
            workflows=[modes.ChoreoStage, modes.AgentDecidesRun, modes.FloorRun, modes.FloorIoRun, modes.FloorWait],
            activities=[
                self.choreo.choreo_work,
                self.choreo.choreo_dead_letter,
                decide.decide_work,
                modes.noop,
                floor_io.stage,
                floor_io.trail,
            ],
            activity_executor=ThreadPoolExecutor(max_workers=32),
            max_concurrent_activities=32,
        )
        self.choreo.task_queue = self.queue + "-modes"
        async with base, extra:
            yield

    # -- modes ---------------------------------------------------------------------------------

    async def run_mode(self, mode: str, workload: str) -> tuple[list[RunRecord], float]:
        """Execute the runs (timed: latency and throughput), then read what each left behind.

        The second phase (audit trails, histories, stored bytes) is measurement, not the system
        under test: it runs after the wall clock stops, and its blocking S3 reads stay off the
        event loop the in-process workers share.
        """
        config = self.config
        w4 = workload == "W4"
        count = config.w4_runs if w4 else config.inputs
        replays = 0 if w4 else config.replays
        jobs = []
        for index in range(count):
            route = "b" if self.rng.random() < 0.5 else "c"
            input_id = f"{mode}-{workload}-{index}-{uuid.uuid4().hex[:6]}"
            for copy in range(replays + 1):
                jobs.append((input_id, copy > 0, {"route": route, "input": input_id}))
        execute, record = {
            "B3": (self.b3, self.record_b3),
            "B1": (self.b1, self.record_b1),
            "B2": (self.b2, self.record_b2),
        }[mode]
        started = time.perf_counter()
        executed = await bounded(
            config.w4_concurrency if w4 else config.concurrency,
            [partial(execute, workload, *job) for job in jobs],
        )
        wall = time.perf_counter() - started
        if mode == "B1":
            await asyncio.sleep(0.5)  # duplicate chains keep running after a run's first completion
        records = await bounded(8, [partial(record, workload, run) for run in executed])
        return records, wall

    async def b3(self, workload: str, input_id: str, replay: bool, data: dict[str, Any]) -> Executed:
        run_id = f"b3-{uuid.uuid4().hex[:10]}"
        began = time.perf_counter()
        await self.dsmo.start(definition(workload), data, run_id=run_id, task_queue=self.queue)
        result = await self.dsmo.result(run_id)
        return Executed(run_id, input_id, replay, time.perf_counter() - began, result)

    async def record_b3(self, workload: str, run: Executed) -> RunRecord:
        result = run.outcome
        events = await asyncio.to_thread(self._audit, run.run_id)
        executions = {e.stage for e in self.log.for_run(run.run_id)}
        return run.record(
            path=result.path,
            success=result.status is RunStatus.COMPLETED,
            duplicates=sum(e["type"] == "DUPLICATE_IGNORED" for e in events),
            orphans=len(executions - set(result.path)),
            dlq=sum(e["type"] == "DEAD_LETTERED" for e in events),
            events=len(events),
            bytes_stored=await self._bytes_b3(run.run_id, definition(workload).workflow_version),
        )

    def _input_artifact(self, mode: str, run_id: str, data: dict[str, Any]) -> dict[str, Any]:
        """B1/B2 runs start, like B3's, from an input artifact in the store."""
        return {"uri": self.store.put_json_once(f"artifacts/bench-{mode}/{run_id}/input.json", data).uri}

    async def b1(self, workload: str, input_id: str, replay: bool, data: dict[str, Any]) -> Executed:
        run_id = f"b1-{uuid.uuid4().hex[:10]}"
        began = time.time()
        data = await asyncio.to_thread(self._input_artifact, "b1", run_id, data)
        await self.dsmo.temporal.start_workflow(
            modes.ChoreoStage.run,
            modes.StageMessageB(run_id=run_id, stage="A", workload=workload, input=data),
            id=f"choreo-{run_id}-A",
            task_queue=self.queue + "-modes",
        )
        deadline = time.monotonic() + 60
        while run_id not in self.done and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        finished, success = self.done.get(run_id, (time.time(), False))
        return Executed(run_id, input_id, replay, finished - began, success)

    async def record_b1(self, workload: str, run: Executed) -> RunRecord:
        executions = [e for e in self.log.for_run(run.run_id) if e.outcome in ("ok", "timeout")]
        path: list[str] = []
        for execution in executions:
            if execution.stage not in path and "-ack" not in execution.stage:
                path.append(execution.stage)
        stage_runs = [e for e in executions if "-ack" not in e.stage]
        per_stage = {stage: sum(e.stage == stage for e in stage_runs) for stage in path}
        return run.record(
            path=path,
            success=run.outcome,
            duplicates=sum(count - 1 for count in per_stage.values()),
            orphans=len(stage_runs) - len(path),
            dlq=self.choreo.dead_letters.get(run.run_id, 0),
            events=len(self.log.for_run(run.run_id)),
            # + its stage workflows' histories, not counted
            bytes_stored=await asyncio.to_thread(self._prefix_bytes, f"artifacts/bench-b1/{run.run_id}/"),
        )

    async def b2(self, workload: str, input_id: str, replay: bool, data: dict[str, Any]) -> Executed:
        run_id = f"b2-{uuid.uuid4().hex[:10]}"
        began = time.perf_counter()
        data = await asyncio.to_thread(self._input_artifact, "b2", run_id, data)
        result = await self.dsmo.temporal.execute_workflow(
            modes.AgentDecidesRun.run,
            modes.B2Request(run_id=run_id, workload=workload, input=data, ambiguity=self.config.ambiguity),
            id=run_id,
            task_queue=self.queue + "-modes",
        )
        return Executed(run_id, input_id, replay, time.perf_counter() - began, result)

    async def record_b2(self, workload: str, run: Executed) -> RunRecord:
        result = run.outcome
        graph = modes.graph_of(workload)
        invalid = next((i for i in range(1, len(result.path)) if result.path[i] not in graph[result.path[i - 1]]), None)
        stored = await asyncio.to_thread(self._prefix_bytes, f"artifacts/bench-b2/{run.run_id}/")
        return run.record(
            path=result.path,
            success=result.success and invalid is None,
            duplicates=len(result.path) - len(set(result.path)),
            orphans=0 if invalid is None else len(result.path) - invalid,
            dlq=result.dlq,
            events=len(self.log.for_run(run.run_id)),
            bytes_stored=await self._history_bytes(run.run_id) + stored,
        )

    # -- measurements --------------------------------------------------------------------------

    def _audit(self, run_id: str) -> list[dict[str, Any]]:
        import json

        try:
            body = self.store.read_bytes(self.store.uri(audit_key(run_id)))
        except Exception:  # noqa: BLE001 - an unexported trail counts as empty
            return []
        return [json.loads(line) for line in body.decode().splitlines() if line]

    async def _history_bytes(self, run_id: str) -> int:
        described = await self.dsmo.temporal.get_workflow_handle(run_id).describe()
        return int(described.raw_description.workflow_execution_info.history_size_bytes)

    def _prefix_bytes(self, prefix: str) -> int:
        listed = self.store.s3.list_objects_v2(Bucket=self.store.bucket, Prefix=prefix).get("Contents", [])
        return sum(int(item["Size"]) for item in listed)

    async def _bytes_b3(self, run_id: str, version: str) -> int:
        history = await self._history_bytes(run_id)
        stored = await asyncio.to_thread(
            lambda: self._prefix_bytes(f"artifacts/{version}/{run_id}/") + self._prefix_bytes(audit_key(run_id))
        )
        return history + stored

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
