"""B3 against the floors of its stack, in interleaved rounds, and resume latency.

Two floors: raw Temporal (the same shape with no-op activities: no artifacts, no audit), which
the issue's targets are set against, and the floor plus artifact I/O (the same S3 requests as
a DSMO run, nothing else). The second splits B3's overhead over raw Temporal into what passing
artifacts by reference costs on this stack and what the orchestration itself costs. A third,
the floor plus I/O plus the search attributes every DSMO run keeps (the external contract:
status, agent and version at start, the final status at the end), tells the contract's
visibility writes apart from the rest of the orchestration.

Two more sides run the stages as Temporal local activities: B3 with its stages local
(`b3_local`) and the floor plus I/O with local activities (`floor_io_local`), the comparison
the issue's local-stage target (W1 p50 <= 1.1x) is set on.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from temporalio.common import SearchAttributePair, TypedSearchAttributes

from bench import modes
from bench.cpu import CpuMeter, per_run_ms
from bench.jobs import bounded
from bench.metrics import percentile
from bench.workloads import RESUMED_STAGE, inbox_resume_definition, resume_definition
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus

if TYPE_CHECKING:
    from bench.agents import ExecutionLog
    from dsmo.activities.artifacts import ArtifactStore
    from dsmo.client.dsmo_client import DsmoClient
    from dsmo.config.settings import Settings

# The sides of each round, rotated so that each runs in each place of a round equally often
# when the rounds are a multiple of the sides (the full bench's twelve; the quick one's six).
SIDES = ("b3", "b3_local", "floor", "floor_io", "floor_io_sa", "floor_io_local")
STAGES = 3  # W1 and W4 are A -> B -> C


class FloorComparison:
    """Mixed into Bench: the measurements the issue's targets are judged on."""

    dsmo: DsmoClient
    settings: Settings
    config: Any
    queue: str
    log: ExecutionLog
    starter_store: ArtifactStore
    b3_latency: Callable[..., Awaitable[float]]  # (workload, *, local=False) -> seconds

    async def floor(self) -> dict[str, Any]:
        """B3 against the floors on the W1 and W4 shapes, in interleaved rounds.

        Each shape runs as ``paired_rounds`` rounds of one batch per side, the sides' order
        rotated each round, each batch at least ``paired_waves`` waves of the shape's concurrency:
        throughput is a rate sustained over several waves. Two waves of W4 (100 runs at 50) mostly
        timed how long the slowest runs of a burst took, so B3's longer tail counted twice.
        Throughput is the median over rounds and its ratio the median of the rounds' ratios, so a
        stall that hits one batch (a full bench once measured the floor's W4 at a quarter of its
        usual rate that way) does not decide the result; latency percentiles pool every run.
        Measured minutes apart, the sides would also compare the machine's load at two moments:
        these machines are shared, and that drift was as large as the differences measured.
        """
        rounds = self.config.paired_rounds
        shapes = {
            "W1": (self.config.inputs * (self.config.replays + 1), self.config.concurrency),
            "W4": (self.config.w4_runs, self.config.w4_concurrency),
        }
        batches = {
            shape: max(count // rounds, self.config.paired_waves * concurrency)
            for shape, (count, concurrency) in shapes.items()
        }
        meter = CpuMeter.for_stack(self.settings)
        measured: dict[str, dict[str, Any]] = {side: {} for side in SIDES}
        per_round: dict[str, dict[str, list[float]]] = {}
        for shape, (_, concurrency) in shapes.items():
            jobs = {
                "b3": self._b3_job(shape),
                "b3_local": self._b3_job(shape, local=True),
                "floor": self._floor_run,
                "floor_io": self._floor_io_run,
                "floor_io_sa": self._floor_io_visible_run,
                "floor_io_local": self._floor_io_local_run,
            }
            latencies: dict[str, list[float]] = {side: [] for side in SIDES}
            rates: dict[str, list[float]] = {side: [] for side in SIDES}
            cpu: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
            batch = batches[shape]
            for index in range(rounds):
                shift = index % len(SIDES)
                for side in SIDES[shift:] + SIDES[:shift]:
                    before, started = meter.sample(), time.perf_counter()
                    latencies[side] += await bounded(concurrency, [jobs[side]] * batch)
                    rates[side].append(batch / (time.perf_counter() - started) * 60)
                    cpu[side].append(per_run_ms(before, meter.sample(), batch))
            for side in SIDES:
                measured[side][shape] = _summary(latencies[side], rates[side], cpu[side])
            per_round[shape] = rates
        b3, b3_local, floor, floor_io, floor_io_sa, floor_io_local = (measured[side] for side in SIDES)

        def round_ratio(shape: str, ours: str, base: str) -> float:
            rates = per_round[shape]
            return statistics.median(a / b for a, b in zip(rates[ours], rates[base], strict=True))

        return {
            **floor,
            "b3": b3,
            "floor_io": floor_io,
            "floor_io_sa": floor_io_sa,
            "b3_local": b3_local,
            "floor_io_local": floor_io_local,
            "rounds": {shape: rounds for shape in shapes},
            "batch": batches,
            "ratios": {
                "w1_p50": b3["W1"]["p50"] / floor["W1"]["p50"],
                "w1_p95": b3["W1"]["p95"] / floor["W1"]["p95"],
                "w1_throughput": round_ratio("W1", "b3", "floor"),
                "w4_throughput": round_ratio("W4", "b3", "floor"),
                # Local stages against the same work on local activities (I/O included).
                "w1_p50_local": b3_local["W1"]["p50"] / floor_io_local["W1"]["p50"],
                "w4_throughput_local": round_ratio("W4", "b3_local", "floor_io_local"),
            },
            # B3's overhead over raw Temporal, split: artifact I/O, then the orchestration.
            "io_ratios": {
                "w1_p50_io": floor_io["W1"]["p50"] / floor["W1"]["p50"],
                "w1_p50_b3": b3["W1"]["p50"] / floor_io["W1"]["p50"],
                "w4_throughput_io": round_ratio("W4", "floor_io", "floor"),
                "w4_throughput_b3": round_ratio("W4", "b3", "floor_io"),
                "w1_p50_sa": floor_io_sa["W1"]["p50"] / floor_io["W1"]["p50"],
                "w1_p50_b3_sa": b3["W1"]["p50"] / floor_io_sa["W1"]["p50"],
                "w4_throughput_sa": round_ratio("W4", "floor_io_sa", "floor_io"),
                "w4_throughput_b3_sa": round_ratio("W4", "b3", "floor_io_sa"),
            },
        }

    def _b3_job(self, workload: str, *, local: bool = False) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            return await self.b3_latency(workload, local=local)

        return run

    async def _floor_run(self) -> float:
        began = time.perf_counter()
        await self.dsmo.temporal.execute_workflow(
            modes.FloorRun.run, STAGES, id=f"floor-{uuid.uuid4().hex[:10]}", task_queue=self.queue + "-modes"
        )
        return time.perf_counter() - began

    async def _floor_io_run(self, *, visible: bool = False, local: bool = False) -> float:
        """Like a DSMO start: the starter writes the input (its own store, no shared cache), then starts
        the run with the input in its request; ``visible`` also starts it with DSMO's search attributes,
        ``local`` runs its stages as local activities."""
        run_id = f"floorio-{uuid.uuid4().hex[:10]}"
        began = time.perf_counter()
        document = {"route": "b", "input": "paired"}
        stored = await asyncio.to_thread(
            self.starter_store.put_json_once, f"artifacts/bench-floor-io/{run_id}/input.json", document
        )
        await self.dsmo.temporal.execute_workflow(
            modes.FloorIoRun.run,
            args=[run_id, stored.uri, STAGES, document, visible, local],
            id=run_id,
            task_queue=self.queue + "-modes",
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.AGENT_EXECUTION_STATUS, RunStatus.RUNNING.value),
                    SearchAttributePair(sa.AGENT_NAME, "bench-floor-io"),
                    SearchAttributePair(sa.WORKFLOW_VERSION, "bench-floor-io"),
                ]
            )
            if visible
            else None,
        )
        return time.perf_counter() - began

    async def _floor_io_visible_run(self) -> float:
        return await self._floor_io_run(visible=True)

    async def _floor_io_local_run(self) -> float:
        return await self._floor_io_run(local=True)

    async def resume_latency(self, samples: int = 10) -> dict[str, float]:
        """Resume latency as the issue defines it: the event sent until the next action starts.

        B3 waits for a response, then runs one stage: the clock runs from the moment the response
        is sent until that stage's agent starts working (both in this process). Event → run done is
        kept beside it. The bare floor is a signal to a plain workflow waiting on a condition,
        until its completion. A reply already kept in the run's inbox is timed from the moment its
        wait begins (RUN_WAITING) until the next stage's agent starts.
        """
        client = self.dsmo.temporal
        to_action, to_done, bare, from_inbox = [], [], [], []
        for _ in range(samples):
            from_inbox.append(await self._inbox_resume())
            run_id = f"resume-{uuid.uuid4().hex[:10]}"
            await self.dsmo.start(resume_definition(), {}, run_id=run_id, task_queue=self.queue)
            await self.dsmo.wait_for_status(run_id, {RunStatus.WAITING}, interval=0.02)
            sent = time.time()
            await self.dsmo.respond(run_id, "ok")
            await self.dsmo.result(run_id)
            to_done.append(time.time() - sent)
            to_action.append(next(e.at for e in self.log.for_run(run_id) if e.stage == RESUMED_STAGE) - sent)
            handle = await client.start_workflow(
                modes.FloorWait.run, id=f"bare-{uuid.uuid4().hex[:10]}", task_queue=self.queue + "-modes"
            )
            await asyncio.sleep(0.05)
            began = time.perf_counter()
            await handle.signal(modes.FloorWait.resume)
            await handle.result()
            bare.append(time.perf_counter() - began)
        return {
            "b3_p50": percentile(to_action, 50),
            "b3_done_p50": percentile(to_done, 50),
            "bare_p50": percentile(bare, 50),
            "ratio": percentile(to_action, 50) / percentile(bare, 50),
            "inbox_p50": percentile(from_inbox, 50),
        }

    async def _inbox_resume(self) -> float:
        """One run whose reply arrived early: its wait begins -> the next stage's agent starts (s)."""
        run_id = f"inbox-{uuid.uuid4().hex[:10]}"
        await self.dsmo.start(inbox_resume_definition(), {}, run_id=run_id, task_queue=self.queue)
        await self.dsmo.wait_for_status(run_id, {RunStatus.WAITING}, interval=0.02)
        kept = await self.dsmo.respond(run_id, "ok")
        assert kept.buffered, kept
        await self.dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "go"})
        await self.dsmo.result(run_id)
        began = next(e.at for e in await self.dsmo.events(run_id) if e.type == "RUN_WAITING" and e.stage == "w")
        started = next(e.at for e in self.log.for_run(run_id) if e.stage == RESUMED_STAGE)
        return started - began.timestamp()


def _summary(latencies: list[float], rates: list[float], cpu: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "throughput": statistics.median(rates),
        "throughput_per_round": rates,
        # Median over rounds, per process: where each run's CPU went.
        # A process that went away mid-batch is left out rather than half-counted.
        "cpu_ms_per_run": {
            role: statistics.median(sample[role] for sample in cpu)
            for role in cpu[0]
            if all(role in sample for sample in cpu)
        },
    }
