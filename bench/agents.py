"""The benchmark's agent: one deterministic piece of work for every stage of every mode.

Each stage reads its input document, and its output carries the input's id, route and workload
forward, so every later stage knows which input (and so which faults) it serves. Faults come
from `bench.paired`, keyed by input, stage and attempt (a replay meets its original's draws).
B3's agent runs inside DSMO's worker; B1's and B2's run in the consumer processes
(`bench.consumer`). Each logs its executions to the shared log, with the fault it drew. Table 1's
B3 agent runs in a worker process of its own (`bench.b3_worker`), so it logs to the shared log
only; the floor comparison's runs in the bench's process and keeps an in-memory log it times
stages by (they meet no faults).

B3's post-work faults behave as they would in production (`after_work` decides which). A crash
(after the work, before the commit) SIGKILLs the worker process, with every attempt in flight in
it; its supervisor starts a new one a second later, and Temporal's start-to-close timeout starts
the next attempt. A lost completion (after the commit) is a network loss, not a death:
`LostCompletions`, which wraps DSMO's stage activity, tells the SDK the activity will be
completed elsewhere and nobody does; the next attempt finds the committed output and reports it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from bench.paired import NO_FAULTS, RATES, draw, fault_key
from bench.queue_db import QueueDb
from bench.shared_rule import OK, StageExecution
from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.activities.stage import StageActivities
from dsmo.workflows.contracts.activity_io import RUN_STAGE, StageMessage, StageSummary, StageTask

# A slow attempt: past the 1.5 s stage timeout and the queue's visibility timeout, and past when
# the next attempt starts (Temporal's retry timer fires up to about a second late on a loaded dev
# server: with 2.5 s, a slow attempt sometimes committed before its retry began).
SLOW_S = 4.0
REPLAY_MARK = ".replay-"
# What an attempt does once its agent has worked (`after_work`).
REPORT, DIE, LOSE_COMPLETION = "report", "die", "lose_completion"


def after_work(fault: str | None) -> str:
    """What a B3 attempt does after its agent worked: a crash dies before the commit (`DIE`), a
    lost ack commits and then loses its completion (`LOSE_COMPLETION`), anything else reports."""
    if fault == "crash":
        return DIE
    return LOSE_COMPLETION if fault == "lost_ack" else REPORT


def kill_self() -> None:
    """A planned crash point: this process dies at once, as under ``kill -9`` (nothing flushed,
    nothing reported, every attempt in flight beside this one lost with it)."""
    os.kill(os.getpid(), signal.SIGKILL)


def output_of(document: dict[str, Any], stage: str) -> dict[str, Any]:
    """The stage's output: a digest of its input, with the input's identity carried forward."""
    route = str(document.get("route", "b"))
    digest = hashlib.sha256(f"{stage}|{route}".encode()).hexdigest()[:16]
    carried: dict[str, Any] = {key: document[key] for key in ("input", "workload", "route") if key in document}
    return {**carried, "stage": stage, "route": route, "digest": digest}


def replay_index(run_id: str) -> int:
    """A B3 replay's index, from the id the bench gives it (``<original>.replay-<n>``)."""
    return int(run_id.rsplit(REPLAY_MARK, 1)[1]) if REPLAY_MARK in run_id else 0


@dataclass
class Execution:
    """One B3 execution as this process saw it."""

    run_id: str
    stage: str
    attempt: int
    outcome: str
    at: float


@dataclass
class ExecutionLog:
    """B3's executions in this process: the floor comparison's timing source."""

    entries: list[Execution] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, run_id: str, stage: str, attempt: int, outcome: str) -> None:
        with self.lock:
            self.entries.append(Execution(run_id, stage, attempt, outcome, time.time()))

    def for_run(self, run_id: str) -> list[Execution]:
        with self.lock:
            return [entry for entry in self.entries if entry.run_id == run_id]


@dataclass
class B3Agent:
    """The `bench-stage` processor, with the paired faults; the shared log when ``shared`` is set,
    the in-memory ``log`` when it is given; ``crash`` is how it dies at a crash point."""

    seed: int
    log: ExecutionLog | None = None
    shared: QueueDb | None = None
    consumer: str = "dsmo-worker"
    crash: Callable[[], None] = kill_self
    # (run, stage, attempt) whose completion is to be lost after the commit (LostCompletions)
    losing: set[tuple[str, str, int]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0  # calls working now (a slow attempt outlives its run)

    def __call__(self, document: Any, message: StageMessage) -> ProcessorOutput:
        with self.lock:
            self.in_flight += 1
        try:
            return self._work(document, message)
        finally:
            with self.lock:
                self.in_flight -= 1

    async def settled(self, timeout: float) -> None:
        """Wait until no call is working (at most ``timeout`` seconds; a hang guard)."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    def _work(self, document: Any, message: StageMessage) -> ProcessorOutput:
        document = document if isinstance(document, dict) else {}
        workload, input_id = str(document.get("workload", "")), str(document.get("input", ""))
        # Runs that are not Table 1's carry no workload: they meet no faults.
        rates = RATES.get(workload, NO_FAULTS)
        fault = draw(rates, self.seed, input_id, message.stage, message.attempt)
        started = time.time()

        def record(outcome: str, wrote: str = "") -> None:
            if self.log is not None:
                self.log.add(message.run_id, message.stage, message.attempt, outcome)
            if self.shared is not None:
                execution = StageExecution(
                    message.run_id,
                    message.stage,
                    message.attempt,
                    self.consumer,
                    outcome,
                    started,
                    time.time(),
                    exec_id=execution_id(message.stage, message.attempt),
                    fault=fault or "",
                    fault_key=fault_key(input_id, message.stage, message.attempt),
                    read_uri=message.artifact_in_uri,
                    wrote_uri=wrote,
                )
                self.shared.log("b3", execution)

        if fault == "transient":
            record("transient")
            raise ConnectionError(f"stage {message.stage}: injected transient failure")
        if fault == "permanent":
            record("permanent")
            raise InvalidInput(f"stage {message.stage}: injected permanent failure")
        if fault == "slow":
            time.sleep(SLOW_S)  # Temporal has timed this attempt out and started another meanwhile
        output = output_of(document, message.stage)
        then = after_work(fault)
        # The stage commits the output to this attempt's key after the agent returns; a crash
        # before the commit writes nothing. The row is in PostgreSQL before the process dies.
        record(OK, "" if then == DIE else message.artifact_out_uri)
        if then == DIE:
            self.crash()  # the worker process dies: no completion, no commit
        if then == LOSE_COMPLETION:
            with self.lock:
                self.losing.add((message.run_id, message.stage, message.attempt))
        return ProcessorOutput(document=output, summary={"route": output["route"]})

    def completion_lost(self, run_id: str, stage: str, attempt: int) -> bool:
        """Whether this attempt's completion is to be lost (once)."""
        with self.lock:
            if (run_id, stage, attempt) in self.losing:
                self.losing.discard((run_id, stage, attempt))
                return True
            return False


def execution_id(stage: str, attempt: int) -> str:
    """A B3 execution's id in its run: the stage and the orchestrator's attempt."""
    return f"{stage}:{attempt}"


class LostCompletions:
    """DSMO's stage activity, with the completions B3's agent marked lost dropped after the commit."""

    def __init__(self, agent: B3Agent, stages: StageActivities) -> None:
        self.agent, self.stages = agent, stages

    @activity.defn(name=RUN_STAGE)
    async def run_stage(self, task: StageTask) -> StageSummary:
        """Run the stage; if its agent drew a lost ack, report nothing (the commit stands)."""
        summary = await self.stages.run_stage(task)
        if self.agent.completion_lost(task.run_id, task.stage, task.attempt):
            activity.raise_complete_async()
        return summary


def bench_registry(agent: B3Agent) -> ProcessorRegistry:
    """A registry with ``agent`` as the `bench-stage` processor."""
    registry = ProcessorRegistry()

    def stage(document: Any, message: StageMessage) -> ProcessorOutput:
        return agent(document, message)

    registry.register("bench-stage", "1.0.0")(stage)
    return registry
