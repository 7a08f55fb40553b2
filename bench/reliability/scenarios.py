"""The three faults of the reliability suite, each against a FaultStack, each counted by checks.

1. worker SIGKILL in the middle of W3-style runs (branching stages + database effects);
2. Temporal server SIGKILL with every run waiting for an event (SQLite file persistence);
3. the S3 store stopped for a while during stage execution (retry budgets above and below it).

Where a scenario must strike stages in flight, it holds them (the slow agent's ``holdFile``)
until the fault has struck, so what a scenario proves never depends on how fast the machine is.

Every scenario returns a ScenarioResult; tests assert on it, `make reliability` tabulates it.
Longer than most modules because the three scenarios share their run launching and counting
helpers, which nothing else uses.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from bench.reliability import checks
from bench.reliability.stack import FaultStack
from bench.reliability.worker import SLOW_AGENT
from dsmo.activities.artifacts import ArtifactStore
from dsmo.client.dsmo_client import DsmoClient
from dsmo.runtime.storage import artifact_store
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import ExecutionResult
from dsmo.workflows.definition.model import AgentDefinition, parse_definition
from dsmo_examples.orders.db import OrderDatabase
from dsmo_examples.orders.plugin import database_url

PRODUCT = "reliability-lamp"
INVOICE = "Invoice INV-7 from billing@acme.test: total 120.50 EUR, payment due in 30 days."
LETTER = "Complaint from ann@example.test: the lamp arrived broken and I would like a refund soon."

# Enough attempts to ride out a crashed worker (its attempts time out after `timeout`).
CRASH_RETRY = {"maxAttempts": 5, "initialInterval": "500ms", "backoffCoefficient": 2.0, "maximumInterval": "2s"}
# A budget well above a 30 s outage: 1+2+4+8+8+... s of backoff over 20 attempts (~135 s).
LONG_RETRY = {"maxAttempts": 20, "initialInterval": "1s", "backoffCoefficient": 2.0, "maximumInterval": "8s"}
# A budget far below it: these stages exhaust their retries and go to the dead-letter store.
SHORT_RETRY = {"maxAttempts": 2, "initialInterval": "500ms", "backoffCoefficient": 2.0, "maximumInterval": "1s"}
# Runs the crash scenario holds in their first stage until the worker is killed.
CRASH_HELD = 4


@dataclass
class ScenarioResult:
    scenario: str
    fault: str
    runs: int
    in_flight: int  # runs not yet finished when the fault struck
    downtime_s: float  # how long the failed part was away
    recover_s: float  # from the part being back to every run finished
    tally: checks.Tally
    dead_letters: int = 0
    redeliveries: int = 0  # events an outside sender had to send again
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        t = self.tally
        return {
            "scenario": self.scenario,
            "fault": self.fault,
            "runs": self.runs,
            "inFlight": self.in_flight,
            "completed": t.completed,
            "failed": t.failed,
            "reExecuted": t.re_executions,
            "lost": t.lost,
            "duplicates": t.duplicates,
            "orphans": t.orphans,
            "brokenTrails": t.broken_trails,
            "deadLetters": self.dead_letters,
            "redeliveries": self.redeliveries,
            "downtimeS": round(self.downtime_s, 2),
            "recoverS": round(self.recover_s, 2),
            "problems": t.problems,
            "notes": self.notes,
        }


# -- definitions ------------------------------------------------------------------------------


def _stage(agent: str, retry: dict[str, Any], timeout: str, **extra: Any) -> dict[str, Any]:
    return {"actionType": "run_agent", "agent": agent, "timeout": timeout, "retry": retry, **extra}


def _effects() -> dict[str, Any]:
    """Two database effects, each once-only by its key (the order saga's first two steps)."""
    invoke = {"actionType": "invoke", "timeout": "5s", "retry": CRASH_RETRY}
    return {
        "create_order": {
            **invoke,
            "action": "create-order",
            "input": {"customer": "{{customer}}", "productId": PRODUCT, "quantity": 1, "amount": 10.0},
            "next": "reserve",
        },
        "reserve": {
            **invoke,
            "action": "reserve-stock",
            "input": {"orderId": "{{steps.create_order.orderId}}", "productId": PRODUCT, "quantity": 1},
        },
    }


EFFECTS = {"create_order": "create_order", "reserve": "reserve_stock"}


def w3_definition() -> AgentDefinition:
    """W3's shape: A -> (B or C) -> D, here slow copy -> extract -> classify -> enrich|validate -> effects."""
    stage: dict[str, Any] = {"retry": CRASH_RETRY, "timeout": "5s"}
    return parse_definition(
        {
            "agent": "reliability-w3",
            "start": "pause",
            "nodes": {
                "pause": _stage(SLOW_AGENT, **stage, next="extract"),
                "extract": _stage("text-extract", **stage, input="{{stages.pause.outputUri}}", next="classify"),
                "classify": _stage(
                    "rule-classify",
                    **stage,
                    input="{{stages.extract.outputUri}}",
                    transitions=[
                        {"when": 'stages.classify.summary.category == "invoice"', "to": "enrich"},
                        {"to": "validate"},
                    ],
                ),
                "enrich": _stage("invoice-enrich", **stage, input="{{stages.classify.outputUri}}", next="create_order"),
                "validate": _stage(
                    "record-validate", **stage, input="{{stages.classify.outputUri}}", next="create_order"
                ),
                **_effects(),
            },
        }
    )


def waiting_definition() -> AgentDefinition:
    """Wait for a reply, then a stage and the database effects."""
    return parse_definition(
        {
            "agent": "reliability-wait",
            "start": "wait",
            "nodes": {
                "wait": {"actionType": "wait_for_response", "parameters": {"timeout": "7d"}, "next": "pause"},
                "pause": _stage(SLOW_AGENT, CRASH_RETRY, "5s", next="create_order"),
                **_effects(),
            },
        }
    )


def outage_definition(budget: str) -> AgentDefinition:
    """Slow copy -> extract; the first stage is held until the store is down, hence its long timeout."""
    retry = LONG_RETRY if budget == "long" else SHORT_RETRY
    return parse_definition(
        {
            "agent": f"reliability-outage-{budget}",
            "start": "pause",
            "nodes": {
                "pause": _stage(SLOW_AGENT, retry, "5m", next="extract"),
                "extract": _stage("text-extract", retry, "20s", input="{{stages.pause.outputUri}}"),
            },
        }
    )


W3_AGENT_NODES = {"pause", "extract", "classify", "enrich", "validate"}


# -- helpers ----------------------------------------------------------------------------------


def _run_input(index: int, delay_ms: int, hold: Path | None = None) -> dict[str, Any]:
    """A run's input; with ``hold``, its slow stage waits until that file exists."""
    return {
        "customer": f"customer-{index}",
        "delayMs": delay_ms,
        "document": {"text": INVOICE if index % 2 == 0 else LETTER},
        **({"holdFile": str(hold)} if hold is not None else {}),
    }


async def _start_all(
    client: DsmoClient, plans: list[tuple[str, AgentDefinition, dict[str, Any]]], task_queue: str
) -> None:
    gate = asyncio.Semaphore(16)

    async def start(run_id: str, definition: AgentDefinition, data: dict[str, Any]) -> None:
        async with gate:
            await client.start(definition, data, run_id=run_id, task_queue=task_queue)

    await asyncio.gather(*(start(*plan) for plan in plans))


async def _until(check: Callable[[], Awaitable[bool] | bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        outcome = check()
        if await outcome if isinstance(outcome, Awaitable) else outcome:
            return
        if time.monotonic() > deadline:
            raise DsmoError(f"reliability: {what} did not happen within {timeout:.0f}s")
        await asyncio.sleep(0.1)


async def _count(client: DsmoClient, query: str) -> int:
    return (await client.temporal.count_workflows(query)).count


async def _results(client: DsmoClient, run_ids: list[str], timeout: float) -> dict[str, ExecutionResult | None]:
    """Every run's final record; None for a run still open after ``timeout`` (counted as lost)."""
    deadline = time.monotonic() + timeout
    gate = asyncio.Semaphore(32)

    async def one(run_id: str) -> ExecutionResult | None:
        async with gate:
            while time.monotonic() < deadline:
                try:
                    return await asyncio.wait_for(client.result(run_id), max(deadline - time.monotonic(), 0.1))
                except TimeoutError:
                    return None
                except (RPCError, DsmoError):
                    await asyncio.sleep(0.5)  # the server may still be coming back
            return None

    found = await asyncio.gather(*(one(run_id) for run_id in run_ids))
    return dict(zip(run_ids, found, strict=True))


def _pause_started(stack: FaultStack, prefix: str) -> int:
    return sum(1 for (run, stage) in checks.executions(stack.execution_log) if run.startswith(prefix))


def _started_runs(stack: FaultStack, prefix: str) -> set[str]:
    """Runs whose slow stage has started at least once."""
    return {run for (run, _stage) in checks.executions(stack.execution_log) if run.startswith(prefix)}


async def _dead_lettering(client: DsmoClient, run_id: str) -> bool:
    """True once the run's stage has failed for good: it is writing its dead letter, or has ended."""
    description = await client.temporal.get_workflow_handle(run_id).describe()
    if description.status is not None and description.status != WorkflowExecutionStatus.RUNNING:
        return True
    pending = description.raw_description.pending_activities
    return any(activity.activity_type.name == contracts.WRITE_DEAD_LETTER for activity in pending)


async def _all_dead_lettering(client: DsmoClient, run_ids: list[str]) -> bool:
    return all(await asyncio.gather(*(_dead_lettering(client, run_id) for run_id in run_ids)))


# -- scenarios --------------------------------------------------------------------------------


async def worker_crash(
    stack: FaultStack, client: DsmoClient, *, runs: int = 100, kill_at: float = 0.3, delay_ms: int = 300
) -> ScenarioResult:
    """SIGKILL the worker once ``kill_at`` of the runs have started their first stage; restart it.

    The last `CRASH_HELD` runs start then, and are held in their first stage until the kill: the
    kill always strikes stages in flight, however fast the others went.
    """
    definition = w3_definition()
    db = OrderDatabase(database_url(stack.settings.state_dir))
    db.set_stock(PRODUCT, 1_000_000)
    prefix = f"crash-{uuid.uuid4().hex[:6]}"
    gate = stack.settings.state_dir / f"{prefix}.release"
    held = min(CRASH_HELD, runs)
    run_ids = [f"{prefix}-{index:04d}" for index in range(runs)]
    plans = [
        (run_id, definition, _run_input(index, delay_ms, gate if index >= runs - held else None))
        for index, run_id in enumerate(run_ids)
    ]
    await _start_all(client, plans[: runs - held], stack.settings.temporal.task_queue)
    await _until(lambda: _pause_started(stack, prefix) >= max(1, int(kill_at * runs)), 120, "the first stages")
    await _start_all(client, plans[runs - held :], stack.settings.temporal.task_queue)
    held_ids = set(run_ids[runs - held :])
    await _until(lambda: held_ids <= _started_runs(stack, prefix), 120, "the held stages")
    # Visibility lists runs asynchronously: the count below includes every held run.
    open_held = " OR ".join(f"WorkflowId='{run_id}'" for run_id in sorted(held_ids))
    await _until(
        lambda: _waiting_all(client, f"({open_held}) AND ExecutionStatus='Running'", held), 60, "held runs listed"
    )

    in_flight = await _count(client, f"WorkflowId STARTS_WITH '{prefix}' AND ExecutionStatus='Running'")
    stack.crash_worker()
    crashed = time.monotonic()
    gate.touch()  # the restarted worker runs the held stages through
    await asyncio.sleep(1.0)  # a supervisor restarts a crashed worker; not instantly
    await stack.restore()
    back = time.monotonic()
    results = await _results(client, run_ids, timeout=240)
    done = time.monotonic()

    tally = _tally(stack, [(run_id, definition) for run_id in run_ids], results, W3_AGENT_NODES, EFFECTS, db)
    return ScenarioResult(
        scenario="worker killed",
        fault="worker SIGKILL, restarted 1 s later",
        runs=runs,
        in_flight=in_flight,
        downtime_s=back - crashed,
        recover_s=done - back,
        tally=tally,
    )


async def temporal_restart(
    stack: FaultStack, client: DsmoClient, *, runs: int = 100, down_s: float = 2.0
) -> ScenarioResult:
    """SIGKILL the Temporal server with every run waiting; restart it on the same SQLite file; resume all."""
    definition = waiting_definition()
    db = OrderDatabase(database_url(stack.settings.state_dir))
    db.set_stock(PRODUCT, 1_000_000)
    prefix = f"restart-{uuid.uuid4().hex[:6]}"
    run_ids = [f"{prefix}-{index:04d}" for index in range(runs)]
    plans = [(run_id, definition, _run_input(index, 0)) for index, run_id in enumerate(run_ids)]
    await _start_all(client, plans, stack.settings.temporal.task_queue)
    waiting = f"WorkflowId STARTS_WITH '{prefix}' AND AgentExecutionStatus='waiting'"
    await _until(lambda: _waiting_all(client, waiting, runs), 120, f"{runs} runs waiting")

    stack.crash_temporal()
    crashed = time.monotonic()
    await asyncio.sleep(down_s)
    await stack.restore()
    back = time.monotonic()
    redeliveries = await _deliver_replies(client, run_ids, timeout=120)
    results = await _results(client, run_ids, timeout=240)
    done = time.monotonic()

    checked = [(run_id, definition) for run_id in run_ids]
    tally = _tally(stack, checked, results, {"pause"}, EFFECTS, db, resumes_expected=1)
    return ScenarioResult(
        scenario="Temporal killed",
        fault=f"Temporal server SIGKILL with every run waiting, restarted {down_s:.0f} s later",
        runs=runs,
        in_flight=runs,
        downtime_s=back - crashed,
        recover_s=done - back,
        tally=tally,
        redeliveries=redeliveries,
    )


async def s3_outage(
    stack: FaultStack,
    client: DsmoClient,
    *,
    runs: int = 40,
    outage_s: float = 30.0,
    short_share: float = 0.25,
    delay_ms: int = 1500,
) -> ScenarioResult:
    """Stop the S3 store for ``outage_s`` while stages run; a share of runs has a retry budget below it.

    Every run's first stage is held until the store is down, so every run meets the outage: the
    short budgets all run out during it, and the store stays down until they have (at least
    ``outage_s``), while the long budgets retry through it.
    """
    long_def, short_def = outage_definition("long"), outage_definition("short")
    prefix = f"outage-{uuid.uuid4().hex[:6]}"
    gate = stack.settings.state_dir / f"{prefix}.release"
    every = max(2, round(1 / short_share)) if short_share > 0 else 0
    plans = []
    for index in range(runs):
        short = every > 0 and index % every == 0
        plans.append((f"{prefix}-{'short' if short else 'long'}-{index:04d}", short_def if short else long_def))
    run_ids = [run_id for run_id, _ in plans]
    short_ids = [run_id for run_id in run_ids if "-short-" in run_id]
    await _start_all(
        client,
        [(run_id, definition, _run_input(index, delay_ms, gate)) for index, (run_id, definition) in enumerate(plans)],
        stack.settings.temporal.task_queue,
    )
    await _until(lambda: set(run_ids) <= _started_runs(stack, prefix), 120, "every run's first stage")
    running = f"WorkflowId STARTS_WITH '{prefix}' AND ExecutionStatus='Running'"
    await _until(lambda: _waiting_all(client, running, runs), 60, "every run listed")  # visibility is asynchronous

    in_flight = await _count(client, f"WorkflowId STARTS_WITH '{prefix}' AND ExecutionStatus='Running'")
    stack.stop_s3()
    stopped = time.monotonic()
    gate.touch()  # every held stage now finishes its work into a store that is down
    await _until(lambda: _all_dead_lettering(client, short_ids), 120, "every short budget running out")
    await asyncio.sleep(max(outage_s - (time.monotonic() - stopped), 0))
    await stack.restore()
    back = time.monotonic()
    results = await _results(client, run_ids, timeout=300)
    done = time.monotonic()

    tally = _tally(stack, plans, results, {"pause", "extract"}, {}, None)
    store = _store(stack)
    dead = 0
    for run_id, _ in plans:
        result = results[run_id]
        letters = checks.dead_letters(store, run_id)
        dead += letters
        failed = result is not None and result.status is not RunStatus.COMPLETED
        if letters and "-short-" not in run_id:
            tally.flag("lost", run_id, "dead-lettered although its retry budget outlasts the outage")
        if failed != bool(letters):
            tally.flag("lost", run_id, f"{'failed without' if failed else 'completed with'} a dead letter")
        if letters > 1:
            tally.flag("duplicates", run_id, f"{letters} dead letters", letters - 1)
    return ScenarioResult(
        scenario="S3 stopped",
        fault=f"S3 store stopped {outage_s:.0f} s under every run's first stage; "
        f"1 in {every} runs has a ~2 s retry budget",
        runs=runs,
        in_flight=in_flight,
        downtime_s=back - stopped,
        recover_s=done - back,
        tally=tally,
        dead_letters=dead,
    )


def _tally(
    stack: FaultStack,
    plans: list[tuple[str, AgentDefinition]],
    results: dict[str, ExecutionResult | None],
    agent_nodes: set[str],
    effect_nodes: dict[str, str],
    db: OrderDatabase | None,
    *,
    resumes_expected: int = 0,
) -> checks.Tally:
    """Count every run of a scenario against what the store, the database and the agent's log hold."""
    tally = checks.Tally()
    executed = checks.executions(stack.execution_log)
    store = _store(stack)
    for run_id, definition in plans:
        checks.check_run(
            tally,
            run_id,
            results[run_id],
            workflow_version=definition.workflow_version,
            agent_nodes=agent_nodes,
            effect_nodes=effect_nodes,
            store=store,
            db=db,
            executed=executed,
            resumes_expected=resumes_expected,
        )
    return tally


async def _waiting_all(client: DsmoClient, query: str, runs: int) -> bool:
    return await _count(client, query) >= runs


async def _deliver_replies(client: DsmoClient, run_ids: list[str], timeout: float) -> int:
    """Send each run its reply as an outside system would: retry on any error until accepted."""
    deadline = time.monotonic() + timeout
    gate = asyncio.Semaphore(16)
    resent = 0

    async def deliver(run_id: str) -> None:
        nonlocal resent
        async with gate:
            for attempt in range(1_000):
                try:
                    await client.respond(run_id, "approved", event_id=f"{run_id}:reply")
                    return
                except (RPCError, DsmoError):
                    if time.monotonic() > deadline:
                        raise
                    resent += 1 if attempt == 0 else 0
                    await asyncio.sleep(0.5)

    await asyncio.gather(*(deliver(run_id) for run_id in run_ids))
    return resent


def _store(stack: FaultStack) -> ArtifactStore:
    return artifact_store(stack.settings)
