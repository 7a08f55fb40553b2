"""The benchmark's agents: one deterministic processor for every stage, with seeded faults.

Faults (workload W3) are drawn from a RNG seeded by (seed, run, stage, attempt): a replay of a
run is a new run, so it draws new faults, as a re-execution in production would meet new ones.
Every execution is logged, so orphans and duplicates can be counted for every mode alike.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from dsmo.activities.errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry
from dsmo.workflows.contracts import StageMessage

TIMEOUT_SLEEP_S = 2.5  # longer than the stages' 1.5 s start-to-close timeout


@dataclass(frozen=True)
class Faults:
    seed: int = 7
    timeout_rate: float = 0.0
    transient_rate: float = 0.0
    permanent_rate: float = 0.0
    stages: frozenset[str] = frozenset({"B", "C", "B-ack", "C-ack"})

    def draw(self, run_id: str, stage: str, attempt: int) -> str | None:
        if stage not in self.stages:
            return None
        roll = random.Random(f"{self.seed}|{run_id}|{stage}|{attempt}").random()
        if roll < self.permanent_rate:
            return "permanent"
        if roll < self.permanent_rate + self.timeout_rate:
            return "timeout"
        if roll < self.permanent_rate + self.timeout_rate + self.transient_rate:
            return "transient"
        return None


@dataclass
class Execution:
    run_id: str
    stage: str
    attempt: int
    outcome: str  # ok | timeout | transient | permanent
    at: float


@dataclass
class ExecutionLog:
    """Every stage execution of every mode, in the benchmark's process."""

    entries: list[Execution] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, run_id: str, stage: str, attempt: int, outcome: str) -> None:
        with self.lock:
            self.entries.append(Execution(run_id, stage, attempt, outcome, time.time()))

    def for_run(self, run_id: str) -> list[Execution]:
        with self.lock:
            return [entry for entry in self.entries if entry.run_id == run_id]


def work_on_artifacts(
    store: Any, mode: str, message: Any, attempt: int, faults: Any, log: ExecutionLog
) -> dict[str, Any]:
    """B1/B2 agents do the same artifact I/O as a DSMO stage: read the input, write the output."""
    document = store.read_json(message.input["uri"]) if "uri" in message.input else message.input
    output = work(document, message.run_id, message.stage, attempt, faults, log)
    store.put_json_once(f"artifacts/bench-{mode}/{message.run_id}/{message.stage}/{uuid.uuid4().hex}.json", output)
    return output


def work(document: Any, run_id: str, stage: str, attempt: int, faults: Any, log: ExecutionLog) -> dict[str, Any]:
    """What every bench agent does: a deterministic digest of its input, unless a fault strikes."""
    fault = faults.draw(run_id, stage, attempt)
    if fault == "permanent":
        log.add(run_id, stage, attempt, "permanent")
        raise InvalidInput(f"stage {stage}: injected permanent failure")
    if fault == "transient":
        log.add(run_id, stage, attempt, "transient")
        raise ConnectionError(f"stage {stage}: injected transient failure")
    if fault == "timeout":
        time.sleep(TIMEOUT_SLEEP_S)  # the orchestrator has given up on this attempt by now
    route = document.get("route", "b") if isinstance(document, dict) else "b"
    digest = hashlib.sha256(f"{stage}|{route}".encode()).hexdigest()[:16]
    log.add(run_id, stage, attempt, "timeout" if fault else "ok")
    return {"stage": stage, "route": route, "digest": digest}


def bench_registry(faults: Any, log: ExecutionLog) -> ProcessorRegistry:
    registry = ProcessorRegistry()

    def stage(document: Any, message: StageMessage) -> ProcessorOutput:
        output = work(document, message.run_id, message.stage, message.attempt, faults, log)
        return ProcessorOutput(document={**output, "route": output["route"]}, summary={"route": output["route"]})

    registry.register("bench-stage", "1.0.0")(stage)
    return registry
