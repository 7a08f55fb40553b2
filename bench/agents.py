"""The benchmark's agent: one deterministic piece of work for every stage of every mode.

Each stage reads its input document, and its output carries the input's id, route and workload
forward, so every later stage knows which input (and so which faults) it serves. Faults come
from `bench.paired`, keyed by input, replay, stage and attempt. B3's agent runs inside DSMO's
worker; B1's and B2's run in the consumer processes (`bench.consumer`). Each logs its executions
to the shared log; B3's also keeps an in-memory log, which the floor comparison times stages by.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.paired import RATES, draw
from bench.queue_db import QueueDb
from bench.shared_rule import OK, StageExecution
from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.workflows.contracts.activity_io import StageMessage

SLOW_S = 2.5  # a slow attempt: past the 1.5 s stage timeout and the queue's visibility timeout
REPLAY_MARK = ".replay-"


class CompletionLost(ConnectionError):
    """B3's crash and lost ack: the work was done, its completion never reached Temporal."""


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
    """The `bench-stage` processor, with the paired faults; the shared log when ``shared`` is set."""

    seed: int
    log: ExecutionLog
    shared: QueueDb | None = None
    consumer: str = "dsmo-worker"

    def __call__(self, document: Any, message: StageMessage) -> ProcessorOutput:
        document = document if isinstance(document, dict) else {}
        workload, input_id = str(document.get("workload", "")), str(document.get("input", ""))
        fault = draw(
            RATES.get(workload, RATES["W1"]),
            self.seed,
            input_id,
            replay_index(message.run_id),
            message.stage,
            message.attempt,
        )
        started = time.time()

        def record(outcome: str) -> None:
            self.log.add(message.run_id, message.stage, message.attempt, outcome)
            if self.shared is not None:
                execution = StageExecution(
                    message.run_id, message.stage, message.attempt, self.consumer, outcome, started, time.time()
                )
                self.shared.log("b3", execution)

        if fault == "transient":
            record("transient")
            raise ConnectionError(f"stage {message.stage}: injected transient failure")
        if fault == "permanent":
            record("permanent")
            raise InvalidInput(f"stage {message.stage}: injected permanent failure")
        if fault == "slow":
            time.sleep(SLOW_S)  # Temporal has timed this attempt out and started another by now
        output = output_of(document, message.stage)
        record(OK)
        if fault in ("crash", "lost_ack"):
            raise CompletionLost(f"stage {message.stage}: the completion was lost after the work")
        return ProcessorOutput(document=output, summary={"route": output["route"]})


def bench_registry(agent: B3Agent) -> ProcessorRegistry:
    registry = ProcessorRegistry()

    def stage(document: Any, message: StageMessage) -> ProcessorOutput:
        return agent(document, message)

    registry.register("bench-stage", "1.0.0")(stage)
    return registry
