"""The baselines on the same Temporal + S3 infrastructure, and the raw-Temporal floor.

- B1 choreography: each stage is a message (a `ChoreoStage` workflow); the agent, when done,
  itself enqueues the next stage. No central decision, no dedup: an agent retried after it
  enqueued enqueues again, and the duplicate chain runs too.
- B2 agent decides next: one loop per run that runs whatever stage the agent names; a seeded
  share of the agent's choices is ambiguous, as an LLM router's would be.
- Floor: plain workflows with no-op activities, no artifacts, no audit.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from dsmo.activities.audit_log import chain

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

GRAPHS: dict[str, dict[str, list[str]]] = {
    # stage -> allowed next stages; [] = terminal
    "W1": {"A": ["B"], "B": ["C"], "C": []},
    "W2": {"A": ["B", "C"], "B": ["D"], "C": ["D"], "D": []},
}
TERMINAL = {"W1": "C", "W2": "D"}
STAGE_TIMEOUT = timedelta(seconds=1.5)
RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200), backoff_coefficient=2.0)


def graph_of(workload: str) -> dict[str, list[str]]:
    return GRAPHS["W1" if workload in ("W1", "W4") else "W2"]


def valid_next(workload: str, stage: str, route: str) -> str | None:
    options = graph_of(workload)[stage]
    if not options:
        return None
    if len(options) == 1:
        return options[0]
    return "B" if route == "b" else "C"


class StageMessageB(BaseModel):
    run_id: str
    stage: str
    workload: str
    input: dict[str, Any]


# -- B1: choreography --------------------------------------------------------------------------


@workflow.defn(name="ChoreoStage", sandboxed=False)
class ChoreoStage:
    """One queue message: run the stage's agent (which enqueues the next stage itself)."""

    @workflow.run
    async def run(self, message: StageMessageB) -> None:
        try:
            await workflow.execute_activity(
                "choreo_work", message, start_to_close_timeout=STAGE_TIMEOUT, retry_policy=RETRY
            )
        except ActivityError:
            # Retries exhausted: the message goes to the dead-letter queue; the run is lost.
            await workflow.execute_activity("choreo_dead_letter", message, start_to_close_timeout=timedelta(seconds=10))


@dataclass
class ChoreoActivities:
    client: Client
    task_queue: str
    faults: Any
    log: Any
    done: dict[str, tuple[float, bool]]  # run -> (finished at, success): its first terminal outcome
    store: Any = None
    dead_letters: dict[str, int] = field(default_factory=dict)

    @activity.defn(name="choreo_work")
    async def choreo_work(self, message: StageMessageB) -> None:
        from bench.agents import work_on_artifacts

        attempt = activity.info().attempt
        output = await asyncio.to_thread(work_on_artifacts, self.store, "b1", message, attempt, self.faults, self.log)
        following = valid_next(message.workload, message.stage, output["route"])
        if following is None:
            self.done.setdefault(message.run_id, (time.time(), True))
            return
        # The agent routes: it enqueues the next stage itself (a new message, a new id: no dedup).
        await self.client.start_workflow(
            ChoreoStage.run,
            StageMessageB(run_id=message.run_id, stage=following, workload=message.workload, input=message.input),
            id=f"choreo-{message.run_id}-{following}-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
        )
        # An ack lost after the enqueue (a fault here) makes the broker redeliver: enqueued twice.
        if self.faults.draw(message.run_id, message.stage + "-ack", attempt) in ("transient", "timeout"):
            raise ConnectionError("ack lost after enqueueing the next stage")

    @activity.defn(name="choreo_dead_letter")
    async def choreo_dead_letter(self, message: StageMessageB) -> None:
        self.dead_letters[message.run_id] = self.dead_letters.get(message.run_id, 0) + 1
        self.done.setdefault(message.run_id, (time.time(), False))


# -- B2: agent decides the next stage ----------------------------------------------------------


class DecideResult(BaseModel):
    next: str | None
    route: str


class B2Request(BaseModel):
    run_id: str
    workload: str
    input: dict[str, Any]
    ambiguity: float


class B2Result(BaseModel):
    path: list[str]
    success: bool
    dlq: int


@workflow.defn(name="AgentDecidesRun", sandboxed=False)
class AgentDecidesRun:
    @workflow.run
    async def run(self, request: B2Request) -> B2Result:
        stage: str | None = "A"
        path: list[str] = []
        while stage is not None and len(path) < 8:
            path.append(stage)
            try:
                decided = await workflow.execute_activity(
                    "decide_work",
                    {"request": request.model_dump(), "stage": stage},
                    result_type=DecideResult,
                    start_to_close_timeout=STAGE_TIMEOUT,
                    retry_policy=RETRY,
                )
            except ActivityError:
                return B2Result(path=path, success=False, dlq=1)
            stage = decided.next
        return B2Result(
            path=path, success=path[-1] == TERMINAL["W1" if request.workload in ("W1", "W4") else "W2"], dlq=0
        )


@dataclass
class DecideActivities:
    faults: Any
    log: Any
    store: Any = None

    @activity.defn(name="decide_work")
    def decide_work(self, payload: dict[str, Any]) -> DecideResult:
        from bench.agents import work_on_artifacts

        request = B2Request.model_validate(payload["request"])
        stage = payload["stage"]
        attempt = activity.info().attempt
        message = StageMessageB(run_id=request.run_id, stage=stage, workload=request.workload, input=request.input)
        output = work_on_artifacts(self.store, "b2", message, attempt, self.faults, self.log)
        correct = valid_next(request.workload, stage, output["route"])
        rng = random.Random(f"{self.faults.seed}|decide|{request.run_id}|{stage}|{attempt}")
        if rng.random() < request.ambiguity:
            # An ambiguous routing decision: any stage of the graph, or stopping here.
            choices = [*graph_of(request.workload), None]
            return DecideResult(next=rng.choice(choices), route=output["route"])
        return DecideResult(next=correct, route=output["route"])


# -- the floor: raw Temporal --------------------------------------------------------------------


@activity.defn(name="noop")
async def noop() -> None:
    return None


@workflow.defn(name="FloorRun", sandboxed=False)
class FloorRun:
    @workflow.run
    async def run(self, activities: int) -> None:
        for _ in range(activities):
            await workflow.execute_activity("noop", start_to_close_timeout=timedelta(seconds=10))


@workflow.defn(name="FloorWait", sandboxed=False)
class FloorWait:
    """A bare wait: signal -> completion, the floor of resume latency."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.go)

    @workflow.signal
    def resume(self) -> None:
        self.go = True


# -- the floor plus artifact I/O ----------------------------------------------------------------


class FloorIoStage(BaseModel):
    run_id: str
    stage: str
    input_uri: str
    input_document: dict[str, Any] | None = None  # as DSMO sends a small run input with the task


@workflow.defn(name="FloorIoRun", sandboxed=False)
class FloorIoRun:
    """The floor plus the S3 requests a DSMO run makes, and nothing else.

    The starter writes the input first. The first stage gets that input with its task, as DSMO
    sends a small run input, and later stages read their input by reference; each writes its
    output write-once, on thread-pool activities like DSMO's stages and through the same store
    (so the same cache); a local activity at the end writes a trail file, as DSMO's audit export
    does. No definition, no audit events, no search attributes, no saga: what B3 costs beyond
    this is the orchestration itself.
    """

    @workflow.run
    async def run(self, run_id: str, input_uri: str, stages: int, input_document: dict[str, Any]) -> None:
        uris, uri = [], input_uri
        document: dict[str, Any] | None = input_document
        for index in range(stages):
            uri = await workflow.execute_activity(
                "floor_io_stage",
                FloorIoStage(run_id=run_id, stage=chr(ord("A") + index), input_uri=uri, input_document=document),
                result_type=str,
                start_to_close_timeout=timedelta(seconds=10),
            )
            uris.append(uri)
            document = None
        await workflow.execute_local_activity(
            "floor_io_trail", args=[run_id, uris], start_to_close_timeout=timedelta(seconds=10)
        )


@dataclass
class FloorIoActivities:
    store: Any

    @activity.defn(name="floor_io_stage")
    def stage(self, task: FloorIoStage) -> str:
        document = task.input_document if task.input_document is not None else self.store.read_json(task.input_uri)
        output = {"stage": task.stage, "route": document.get("route", "b"), "digest": uuid.uuid4().hex[:16]}
        return str(self.store.put_json_once(f"artifacts/bench-floor-io/{task.run_id}/{task.stage}.json", output).uri)

    @activity.defn(name="floor_io_trail")
    def trail(self, run_id: str, uris: list[str]) -> None:
        # Hash-chained like DSMO's export, so the floor pays for building the file as well.
        body = chain([{"seq": seq, "artifact": uri} for seq, uri in enumerate(uris, start=1)])
        self.store.put_json_bytes_once(
            f"audit/bench-floor-io/{run_id}.jsonl", body, content_type="application/x-ndjson"
        )
