"""Per-key concurrency under a worker crash: many starts over few keys, one slot per key, several
workers, one SIGKILLed while the lines move.

What is checked comes from each run's trail (when it took its key's slot, `SLOT_TAKEN`, and when
it ended) and from the key locks' own state, never from logs:

- **overlaps**: two runs of one key holding its slot at the same instant (must be 0);
- **out of order**: runs of one key that took the slot in another order than they were started;
- **lost**: runs that did not complete;
- **leaked**: once every run has ended, a key whose lock still keeps a run in line, or that does
  not admit a new start at once (a slot held for a run that ended and not freed when needed).

`tests/integration/flow/test_flow_control_scale.py` runs it on a private stack of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from datetime import datetime

from bench.reliability.stack import FaultStack
from bench.reliability.worker import SLOW_AGENT
from dsmo.client.client_errors import RunClosed, WorkflowTaskFailing
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.places_in_line import key_line
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.definition.flow_control import lock_id
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

AGENT = "keyed-crash"


def keyed_definition() -> AgentDefinition:
    """One slow stage per run, one run per conversation at a time."""
    return parse_definition(
        {
            "agent": AGENT,
            "inputs": ["conversation", "delayMs"],
            "concurrency": [{"key": "{{conversation}}", "limit": 1}],
            "start": "work",
            "nodes": {
                # A stage killed with its worker is retried once its 10 s have passed.
                "work": {"actionType": "run_agent", "agent": SLOW_AGENT, "timeout": "10s", "retry": {"maxAttempts": 5}}
            },
        }
    )


@dataclass
class KeyedCrashResult:
    """What the scenario found (see the module doc)."""

    runs: int
    keys: int
    workers: int
    completed: int = 0
    in_flight: int = 0  # runs open when the worker was killed
    overlaps: int = 0
    out_of_order: int = 0
    lost: int = 0
    leaked: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


async def keyed_crash(
    stack: FaultStack,
    client: DsmoClient,
    *,
    runs: int = 1_000,
    keys: int = 50,
    workers: int = 3,
    delay_ms: int = 30,
    kill_at: float = 0.4,
) -> KeyedCrashResult:
    """Start ``runs`` runs over ``keys`` keys (each key's in order), SIGKILL one of ``workers``
    workers once ``kill_at`` of them have ended, restart it 1 s later, and check every key's line."""
    definition = keyed_definition()
    result = KeyedCrashResult(runs=runs, keys=keys, workers=workers)
    extra = [stack.extra_worker(f"worker-{number}") for number in range(2, workers + 1)]
    started_at = time.monotonic()
    try:
        prefix = f"keyed-{int(time.time())}"
        lines = {
            f"{prefix}-k{key:02d}": [f"{prefix}-k{key:02d}-{n:03d}" for n in range(runs // keys)] for key in range(keys)
        }
        queue = stack.settings.temporal.task_queue

        async def start_line(key: str, run_ids: list[str]) -> None:
            for run_id in run_ids:  # one key's runs in order: the order its line must keep
                await client.start(
                    definition, {"conversation": key, "delayMs": delay_ms}, run_id=run_id, task_queue=queue
                )

        starting = asyncio.gather(*(start_line(key, run_ids) for key, run_ids in lines.items()))
        every = [run_id for run_ids in lines.values() for run_id in run_ids]
        await _until_ended(client, kill_at * len(every))
        running = f"AgentName = '{AGENT}' AND ExecutionStatus = 'Running'"
        result.in_flight = (await client.temporal.count_workflows(running)).count
        stack.crash_worker()
        await asyncio.sleep(1.0)  # a supervisor restarts a crashed worker; not instantly
        await stack.restore()
        await starting
        outcomes = await asyncio.gather(*(_outcome(client, run_id) for run_id in every))
        result.completed = sum(status is RunStatus.COMPLETED for status in outcomes)
        result.lost = len(every) - result.completed
        for key, run_ids in lines.items():
            await _check_line(client, definition, key, run_ids, queue, result)
        result.seconds = time.monotonic() - started_at
    finally:
        for proc in extra:
            proc.stop(timeout=5)
    return result


async def _until_ended(client: DsmoClient, count: float) -> None:
    query = f"AgentName = '{AGENT}' AND ExecutionStatus = 'Completed'"
    deadline = time.monotonic() + 300
    while (await client.temporal.count_workflows(query)).count < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count:.0f} runs ended within 300 s")
        await asyncio.sleep(0.2)


async def _outcome(client: DsmoClient, run_id: str) -> RunStatus | None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            return (await asyncio.wait_for(client.result(run_id), deadline - time.monotonic())).status
        except TimeoutError:
            return None
        except WorkflowTaskFailing:
            # A workflow task the killed worker held timed out; the restarted worker takes the retry.
            await asyncio.sleep(1.0)
    return None


async def _check_line(
    client: DsmoClient, definition: AgentDefinition, key: str, run_ids: list[str], queue: str, result: KeyedCrashResult
) -> None:
    spans: list[tuple[datetime, datetime, str]] = []
    for run_id in run_ids:
        events = await client.events(run_id)
        taken = _first(events, "SLOT_TAKEN")
        ended = _first(events, "RUN_COMPLETED") or _first(events, "RUN_ABORTED")
        if taken is None or ended is None:
            result.problems.append(f"{run_id}: no SLOT_TAKEN or no end in its trail")
            continue
        spans.append((taken.at, ended.at, run_id))
    by_taking = sorted(spans)
    if [run_id for _, _, run_id in by_taking] != [run_id for _, _, run_id in spans]:
        result.out_of_order += 1
        result.problems.append(f"{key}: took the slot in another order than started")
    for (_, before_end, before), (after_start, _, after) in itertools.pairwise(by_taking):
        if after_start < before_end:
            result.overlaps += 1
            result.problems.append(
                f"{key}: {after} took the slot at {after_start} before {before} ended at {before_end}"
            )
    line = await key_line(client.temporal, lock_id(AGENT, key, queue))
    if line is not None and line.queue:
        result.leaked += len(line.queue)
        result.problems.append(f"{key}: its lock still has runs in line {line.queue}")
    # A run nobody waited for ends without giving its slot back: the lock frees it when a start
    # needs it. A probe start must run at once.
    probe = (await client.start(definition, {"conversation": key, "delayMs": 0}, task_queue=queue)).started
    if probe.status != "running":
        result.leaked += 1
        result.problems.append(f"{key}: a new start was {probe.status}, not running, after every run ended")
    with contextlib.suppress(RunClosed):  # it may have run to its end already
        await client.cancel(probe.run_id, reason="probe")


def _first(events: list[AuditEvent], kind: str) -> AuditEvent | None:
    return next((event for event in events if event.type == kind), None)
