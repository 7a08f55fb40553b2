"""Data subjects: what sealing a run's data costs W1 and W4, and how long erasing a subject takes.

On one stack, with the bench's workers (`bench.runner.Bench`, in this process):

- **W4 throughput** (A -> B -> C, many runs at once): the same definition with and without a
  `subject`, every run its own subject (so every start also makes that subject's key: the worst
  case), in interleaved rounds, the side that goes first alternating.
- **W1 latency**: one run at a time, start call to result, sides interleaved run by run.
- **Erasure**: a subject with `erase_runs` ended runs (one stage each), erased: the whole command
  (list the runs, destroy the key, delete every history, append the record), timed once.

`make bench SUBJECTS=1` runs only this section; UPDATE=1 writes it into BENCHMARKS.md.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from bench.jobs import bounded
from bench.metrics import percentile
from bench.runner import Bench, BenchConfig
from bench.workloads import definition
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

SIDES = ("subject", "plain")
START, END = "<!-- subjects:start -->", "<!-- subjects:end -->"
INPUT = {"route": "b", "input": "paired"}


def _with_subject(shape: AgentDefinition, *, stages: int = 3) -> AgentDefinition:
    body = shape.model_dump(mode="json", by_alias=True, exclude_none=True)
    if stages == 1:
        body["nodes"] = {"A": {**body["nodes"]["A"], "next": None}}
        body["nodes"]["A"].pop("next")
    return parse_definition({**body, "agent": f"{body['agent']}-subject", "subject": "{{person.id}}"})


class _Runs:
    def __init__(self, bench: Bench) -> None:
        self.bench, self.dsmo, self.queue = bench, bench.dsmo, bench.queue
        self.tag, self.count = uuid.uuid4().hex[:6], 0
        self.sealed = _with_subject(definition("W4"))

    def job(self, side: str, subject: str | None = None, shape: AgentDefinition | None = None) -> Any:
        async def run() -> float:
            self.count += 1
            run_id = f"subj-{side}-{self.tag}-{self.count}"
            person = subject or run_id
            document = {**INPUT, "person": {"id": person}} if side == "subject" else dict(INPUT)
            chosen = shape or (self.sealed if side == "subject" else definition("W4"))
            began = time.perf_counter()
            await self.dsmo.start(chosen, document, run_id=run_id, task_queue=self.queue)
            status = (await self.dsmo.result(run_id)).status
            if str(status) != "completed":
                raise RuntimeError(f"{run_id} ended {status}")
            return time.perf_counter() - began

        return run

    async def throughput(self, runs: int, rounds: int, concurrency: int) -> dict[str, Any]:
        batch = max(1, runs // rounds)
        rates: dict[str, list[float]] = {side: [] for side in SIDES}
        for index in range(rounds):
            for side in SIDES if index % 2 == 0 else SIDES[::-1]:
                started = time.perf_counter()
                await bounded(concurrency, [self.job(side)] * batch)
                rates[side].append(batch / (time.perf_counter() - started))
        ratios = [sealed / plain for sealed, plain in zip(rates["subject"], rates["plain"], strict=True)]
        return {
            side: {
                "runs_per_second": round(statistics.median(rates[side]), 2),
                "per_round": [round(r, 2) for r in rates[side]],
            }
            for side in SIDES
        } | {
            "runs": batch * rounds,
            "rounds": rounds,
            "concurrency": concurrency,
            "ratio": round(statistics.median(ratios), 3),
        }

    async def latency(self, runs: int) -> dict[str, Any]:
        seconds: dict[str, list[float]] = {side: [] for side in SIDES}
        for index in range(runs):
            for side in SIDES if index % 2 == 0 else SIDES[::-1]:
                seconds[side].append(await self.job(side)())
        figures: dict[str, Any] = {
            side: {"p50": round(percentile(seconds[side], 50), 4), "p95": round(percentile(seconds[side], 95), 4)}
            for side in SIDES
        }
        figures.update(runs=runs, ratio_p50=round(figures["subject"]["p50"] / figures["plain"]["p50"], 3))
        return figures

    async def erasure(self, runs: int, concurrency: int) -> dict[str, Any]:
        subject = f"bench-{self.tag}"
        shape = _with_subject(definition("W4"), stages=1)
        started = time.perf_counter()
        await bounded(concurrency, [self.job("subject", subject, shape)] * runs)
        filled = time.perf_counter() - started
        began = time.perf_counter()
        plan = await self.dsmo.erase_subject(subject, reason="bench", dry_run=True)
        listed = time.perf_counter() - began
        began = time.perf_counter()
        report = await self.dsmo.erase_subject(subject, reason="bench", by="bench")
        erased = time.perf_counter() - began
        return {
            "runs": runs,
            "listed": len(plan.plan.runs),
            "histories_deleted": report.histories_deleted,
            "start_and_finish_seconds": round(filled, 1),
            "dry_run_seconds": round(listed, 2),
            "erase_seconds": round(erased, 2),
        }


async def subject_bench(settings: Any, config: BenchConfig, progress: Any = print) -> dict[str, Any]:
    """The section's three measures at ``config``'s sizes (W4 runs as the flow section's)."""
    bench = Bench(settings, config, progress=progress)
    began = time.perf_counter()
    async with bench.workers():
        runs = _Runs(bench)
        await bounded(4, [runs.job(side) for side in SIDES for _ in range(4)])  # warm both paths
        progress(f"subjects: {config.flow_runs} W4 runs a side in {config.flow_rounds} rounds")
        throughput = await runs.throughput(config.flow_runs, config.flow_rounds, config.w4_concurrency)
        progress(f"subjects: W1, {config.resume_samples} runs a side, one at a time")
        latency = await runs.latency(config.resume_samples)
        erase_runs = 1_000 if config.flow_runs >= 1_000 else 100
        progress(f"subjects: erasing a subject of {erase_runs} runs")
        erasure = await runs.erasure(erase_runs, config.w4_concurrency)
    return {"w4": throughput, "w1": latency, "erasure": erasure, "seconds": round(time.perf_counter() - began, 1)}


def section(results: dict[str, Any]) -> str:
    """The section's text in BENCHMARKS.md."""
    figures = results["subjects"]
    w4, w1, erasure = figures["w4"], figures["w1"], figures["erasure"]
    sealed, plain = w4["subject"]["runs_per_second"], w4["plain"]["runs_per_second"]
    w4_label = f"W4 runs/s ({w4['runs']:,} runs a side, {w4['concurrency']} at once, {w4['rounds']} rounds)"
    deleted = erasure["histories_deleted"]
    return "\n".join(
        [
            START,
            "## Data subjects: the cost of sealing, and erasure",
            "",
            f"`{results['command']}`, {results['started_at']}, {results['machine']}.",
            "The same W4 and W1 definitions with and without a `subject`, interleaved in one run; every run",
            "its own subject, so each start also makes a key (the worst case). With a subject, the input,",
            "every output and every dead letter are encrypted with the subject's key.",
            "",
            "| measure | with a subject | without | ratio |",
            "|---|---:|---:|---:|",
            f"| {w4_label}, median of rounds | {sealed} | {plain} | {w4['ratio']:.2f}x |",
            f"| W1 start to result p50, s ({w1['runs']} runs a side, one at a time) "
            f"| {w1['subject']['p50']} | {w1['plain']['p50']} | {w1['ratio_p50']:.2f}x |",
            f"| W1 p95, s | {w1['subject']['p95']} | {w1['plain']['p95']} | |",
            "",
            f"Erasing one subject with {erasure['runs']:,} ended runs: listing them (`--dry-run`) took "
            f"{erasure['dry_run_seconds']} s;",
            f"the erasure (list, destroy the key, delete {deleted:,} histories, append the record) "
            f"{erasure['erase_seconds']} s.",
            "Temporal removes the deleted histories in the background after that.",
            END,
        ]
    )
