"""Per-key concurrency: what the locks cost a workload, and what one lock can take.

Three measures on one stack, with the bench's workers (`bench.runner.Bench`, in this process):

- **Throughput with a per-key limit.** W4's shape (A -> B -> C, many runs at once, a new run
  starting when one ends) run twice in interleaved rounds: with a concurrency key on the input's
  `customer`, limit 1, every run its own value (so every start claims a key value's slot and
  every end gives it back: the cost of the locks themselves), and the same definition without the key.
- **Start-to-running latency** of both sides: from the start call until the first stage's agent
  runs (the bench agent's clock, in this process), and, on a sample, until the trail's
  `SLOT_TAKEN` and `STAGE_STARTED`.
- **One lock's ceiling**: starts of one key value with a limit no start waits for, driven as fast
  as the client can for a fixed time, each a claim on the same lock workflow; and the same key
  with limit 1, where the key serves its runs one after another (the handover rate).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from bench.cpu import CpuMeter, per_run_ms
from bench.jobs import bounded
from bench.metrics import percentile
from bench.runner import Bench, BenchConfig
from bench.workloads import FLOW_KEY, definition, keyed_definition
from dsmo.config.settings import Settings
from dsmo.workflows.definition.flow_control import lock_id, shard_of
from dsmo.workflows.definition.model import AgentDefinition

SIDES = ("keyed", "plain")
TRAIL_SAMPLE = 20  # runs a side whose trail is read for SLOT_TAKEN and STAGE_STARTED
CEILING_LIMIT = 10_000  # the highest limit a key takes: no start of the ceiling waits
INPUT = {"route": "b", "input": "paired"}  # as the floor comparison's W4 runs


async def flow_bench(
    settings: Settings, config: BenchConfig, progress: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run the section's three measures on ``settings``'s stack at ``config``'s sizes.

    Returns:
        ``{"throughput": {...}, "latency": {...}, "ceiling": {...}, "handover": {...}, "seconds"}``:
        runs per second, CPU ms per run by process and the ratio of the keyed side over the
        plain one; start-to-running percentiles; one lock's starts per second and history.
    """
    began = time.perf_counter()
    bench = Bench(settings, config, progress=progress)
    async with bench.workers():
        side = _Sides(bench)
        await side.warm_up()
        progress(f"flow control: {config.flow_runs} W4 runs a side, keyed and plain, in {config.flow_rounds} rounds")
        throughput = await side.throughput(config.flow_runs, config.flow_rounds, config.w4_concurrency)
        latency = await side.latency()
        progress(f"flow control: starts through one lock for {config.flow_seconds} s")
        ceiling = await side.ceiling(config.flow_seconds, config.w4_concurrency)
        progress(f"flow control: {config.flow_handover_runs} runs of one key, limit 1")
        handover = await side.handover(config.flow_handover_runs, config.w4_concurrency)
    return {
        "throughput": throughput,
        "latency": latency,
        "ceiling": ceiling,
        "handover": handover,
        "concurrency": config.w4_concurrency,
        "seconds": round(time.perf_counter() - began, 1),
    }


class _Sides:
    """The section's runs on one bench's workers, and what they measured."""

    def __init__(self, bench: Bench) -> None:
        self.bench, self.dsmo, self.queue = bench, bench.dsmo, bench.queue
        self.tag = uuid.uuid4().hex[:6]
        self.began: dict[str, dict[str, float]] = {side: {} for side in SIDES}
        self.statuses: dict[str, Counter[str]] = {side: Counter() for side in SIDES}
        self.admitted: dict[str, Counter[str]] = {side: Counter() for side in SIDES}
        self.count = 0

    async def warm_up(self) -> None:
        """A few runs of each side first: the locks' and the runs' code paths warmed up."""
        for side in SIDES:
            await bounded(4, [self._job(side, record=False)] * 4)

    def _job(self, side: str, *, record: bool = True) -> Callable[[], Awaitable[None]]:
        keyed = side == "keyed"

        async def run() -> None:
            self.count += 1
            run_id = f"flow-{side}-{self.tag}-{self.count}"
            document: dict[str, Any] = {**INPUT, FLOW_KEY: run_id} if keyed else dict(INPUT)
            began = time.time()
            report = (
                await self.dsmo.start(
                    keyed_definition() if keyed else definition("W4"), document, run_id=run_id, task_queue=self.queue
                )
            ).started
            ended = await self.dsmo.result(run_id)
            if record:
                self.began[side][run_id] = began
                self.admitted[side][report.status] += 1
                self.statuses[side][str(ended.status)] += 1

        return run

    async def throughput(self, runs: int, rounds: int, concurrency: int) -> dict[str, Any]:
        """Both sides in ``rounds`` rounds, the side that goes first alternating; ``runs`` a side."""
        meter = CpuMeter.for_stack(self.bench.settings)
        batch = max(1, runs // rounds)
        rates: dict[str, list[float]] = {side: [] for side in SIDES}
        cpu: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
        for index in range(rounds):
            for side in SIDES if index % 2 == 0 else SIDES[::-1]:
                before, started = meter.sample(), time.perf_counter()
                await bounded(concurrency, [self._job(side)] * batch)
                rates[side].append(batch / (time.perf_counter() - started))
                cpu[side].append(per_run_ms(before, meter.sample(), batch))
        figures: dict[str, Any] = {
            side: {
                "runs": batch * rounds,
                "runs_per_second": round(statistics.median(rates[side]), 2),
                "runs_per_second_per_round": [round(rate, 2) for rate in rates[side]],
                "cpu_ms_per_run": _median_cpu(cpu[side]),
                "statuses": dict(self.statuses[side]),
                "started_as": dict(self.admitted[side]),
            }
            for side in SIDES
        }
        ratios = [keyed / plain for keyed, plain in zip(rates["keyed"], rates["plain"], strict=True)]
        figures.update(rounds=rounds, batch=batch, ratio=round(statistics.median(ratios), 3))
        return figures

    async def latency(self) -> dict[str, Any]:
        """Start call -> first stage's agent, every run; -> SLOT_TAKEN and STAGE_STARTED, a sample."""
        first: dict[str, float] = {}
        for entry in self.bench.log.entries:
            if entry.stage == "A" and entry.run_id not in first:
                first[entry.run_id] = entry.at
        figures: dict[str, Any] = {}
        for side in SIDES:
            began = self.began[side]
            to_agent = [first[run_id] - at for run_id, at in began.items() if run_id in first]
            trail: dict[str, list[float]] = defaultdict(list)
            for run_id in list(began)[:: max(1, len(began) // TRAIL_SAMPLE)][:TRAIL_SAMPLE]:
                seen = set()
                for event in await self.dsmo.events(run_id):
                    if event.type in ("SLOT_TAKEN", "STAGE_STARTED") and event.type not in seen:
                        seen.add(event.type)
                        trail[event.type].append(event.at.timestamp() - began[run_id])
            figures[side] = {
                "runs": len(to_agent),
                "to_first_agent": _percentiles(to_agent),
                "trail_sample": {kind: _percentiles(values) | {"runs": len(values)} for kind, values in trail.items()},
            }
        return figures

    async def ceiling(self, seconds: float, concurrency: int) -> dict[str, Any]:
        """Starts for ``seconds`` a side, ``concurrency`` at a time, all of one key value (limit
        `CEILING_LIMIT`: none waits) and, as the reference, each start its own key value; in two
        halves, the side that goes first alternating, so both meet the same load."""
        customer = f"ceiling-{self.tag}"
        sides: dict[str, _Drive] = {"one_lock": _Drive(), "lock_per_start": _Drive()}
        meter = CpuMeter.for_stack(self.bench.settings)
        for half in range(2):
            for side in ("one_lock", "lock_per_start") if half == 0 else ("lock_per_start", "one_lock"):
                key = customer if side == "one_lock" else None
                await sides[side].drive(self, meter, seconds / 2, concurrency, key)
        figures = {side: await drive.figures(self.dsmo, concurrency) for side, drive in sides.items()}
        figures["one_lock"]["lock"] = await self._lock_history(
            lock_id(keyed_definition(CEILING_LIMIT, stages=1).agent, customer, self.queue)
        )
        one, spread = figures["one_lock"]["starts_per_second"], figures["lock_per_start"]["starts_per_second"]
        return {**figures, "ratio": round(one / spread, 3) if spread else None}

    async def handover(self, runs: int, concurrency: int) -> dict[str, Any]:
        """``runs`` one-stage runs of one key value with limit 1: the key serves them one by one."""
        customer = f"handover-{self.tag}"
        shape = keyed_definition(1, stages=1)
        run_ids = [f"flow-handover-{self.tag}-{index}" for index in range(runs)]
        began = time.perf_counter()
        starts = [_submit(self.dsmo, shape, {**INPUT, FLOW_KEY: customer}, run_id, self.queue) for run_id in run_ids]
        started_as = Counter(await bounded(concurrency, starts))
        ended = await bounded(concurrency, [_result(self.dsmo, run_id) for run_id in run_ids])
        elapsed = time.perf_counter() - began
        return {
            "runs": runs,
            "seconds": round(elapsed, 2),
            "runs_per_second": round(runs / elapsed, 2),
            "started_as": dict(started_as),
            "statuses": dict(Counter(ended)),
            "lock": await self._lock_history(lock_id(shape.agent, customer, self.queue)),
        }

    async def _lock_history(self, slot: str) -> dict[str, Any]:
        """The executions so far of the shard keeping ``slot``'s line (each continue-as-new starts
        one) and its current history."""
        lock, _ = shard_of(slot)
        statuses: Counter[str] = Counter()
        async for execution in self.dsmo.temporal.list_workflows(f"WorkflowId = '{lock}'"):
            statuses[execution.status.name if execution.status else "UNKNOWN"] += 1
        info = (await self.dsmo.temporal.get_workflow_handle(lock).describe()).raw_description
        current = info.workflow_execution_info
        return {
            "continued_as_new": statuses.get("CONTINUED_AS_NEW", 0),
            "executions": dict(statuses),
            "current_history_events": current.history_length,
            "current_history_bytes": current.history_size_bytes,
        }


class _Drive:
    """Starts sent as fast as the client can, over one or more periods, and what became of them."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.run_ids: list[str] = []
        self.calls: list[float] = []
        self.started_as: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.cpu_ms: dict[str, float] = {}

    async def drive(self, sides: _Sides, meter: CpuMeter, seconds: float, concurrency: int, key: str | None) -> None:
        """``concurrency`` starters, each starting runs one after another for ``seconds``; every
        run's key value is ``key``, or its own run id when ``key`` is None."""
        shape = keyed_definition(CEILING_LIMIT, stages=1)
        before, began = meter.sample(), time.perf_counter()
        deadline = began + seconds

        async def starter(index: int) -> None:
            count = 0
            while time.perf_counter() < deadline:
                count += 1
                run_id = f"flow-ceiling-{sides.tag}-{'one' if key else 'own'}-{index}-{count}-{len(self.run_ids)}"
                document = {**INPUT, FLOW_KEY: key or run_id}
                started = time.perf_counter()
                try:
                    report = (await sides.dsmo.start(shape, document, run_id=run_id, task_queue=sides.queue)).started
                except Exception as err:  # noqa: BLE001 - a refused start is counted, not fatal
                    self.errors[f"{type(err).__name__}: {str(err)[:100]}"] += 1
                    continue
                self.calls.append(time.perf_counter() - started)
                self.started_as[report.status] += 1
                self.run_ids.append(run_id)

        await asyncio.gather(*(starter(index) for index in range(concurrency)))
        self.seconds += time.perf_counter() - began
        for role, ms in per_run_ms(before, meter.sample(), 1).items():
            self.cpu_ms[role] = self.cpu_ms.get(role, 0.0) + ms

    async def figures(self, dsmo: Any, concurrency: int) -> dict[str, Any]:
        """Starts per second, the start call's percentiles, CPU per start; the runs awaited to their end."""
        ended = await bounded(concurrency, [_result(dsmo, run_id) for run_id in self.run_ids])
        count = max(1, len(self.run_ids))
        return {
            "seconds": round(self.seconds, 2),
            "starts": len(self.run_ids),
            "starts_per_second": round(len(self.run_ids) / self.seconds, 1) if self.seconds else 0.0,
            "start_call": _percentiles(self.calls),
            "started_as": dict(self.started_as),
            "errors": dict(self.errors),
            "statuses": dict(Counter(ended)),
            "cpu_ms_per_start": {role: round(ms / count, 2) for role, ms in self.cpu_ms.items()},
        }


def _submit(dsmo: Any, shape: AgentDefinition, document: dict[str, Any], run_id: str, queue: str) -> Any:
    async def start() -> str:
        report = (await dsmo.start(shape, document, run_id=run_id, task_queue=queue)).started
        return str(report.status)

    return start


def _result(dsmo: Any, run_id: str) -> Callable[[], Awaitable[str]]:
    async def wait() -> str:
        return str((await dsmo.result(run_id)).status)

    return wait


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50": round(percentile(values, 50), 4), "p95": round(percentile(values, 95), 4)}


def _median_cpu(samples: list[dict[str, float]]) -> dict[str, float]:
    """Median over rounds per process; a process gone mid-batch is left out rather than half-counted."""
    return {
        role: round(statistics.median(sample[role] for sample in samples), 2)
        for role in samples[0]
        if all(role in sample for sample in samples)
    }
