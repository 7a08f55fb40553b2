"""Replaying a corpus of ended runs against a candidate version, beside the corpus's own first run.

N runs of a version-1 definition shaped like a real agent (a `run_agent` stage, a message, a wait
for the reply, a transition on it, a closing message) run on one worker process and are answered,
half "yes" and half "no". Version 2 follows a "no" up instead of saying goodbye, and
`DsmoClient.what_if` replays the whole corpus against it in one call. The reference is the same
corpus's first run, measured in the same bench run on the same stack: from the starts until every
run waits, then from the replies until every run has ended (the time the runs spent waiting for
the bench to answer them falls between the two and is not counted). The worker counts its agent's
calls in a file (`bench.what_if_agents`); the file channel's outbox counts the messages.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench.cpu import CpuMeter, per_run_ms
from bench.jobs import bounded
from bench.migration_measures import settled_count
from bench.what_if_agents import AGENT, CALLS_FILE, calls
from dsmo.starter.client import what_if
from dsmo.starter.client.definition_files import parse_definition_text
from dsmo.starter.client.dsmo_client import DsmoClient
from dsmo.starter.config.settings import Settings
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition

AT_ONCE = 40  # starts and replies in flight at once, as the migration section starts its runs
REPLAY_MARK = ".whatif-"
# Runs `DsmoClient.what_if` replays at once: its batch's default (the client does not expose it).
REPLAY_CONCURRENCY = inspect.signature(what_if.what_if).parameters["concurrency"].default

DEFINITION = """
agent: {agent}
version: "{version}"
start: profile
nodes:
  profile:
    actionType: run_agent
    agent: {profiler}
    next: ask
  ask:
    actionType: send_message
    parameters: {{message: "Still interested?"}}
    next: reply
  reply:
    actionType: wait_for_response
    parameters: {{timeout: 7d, onTimeout: fail}}
    transitions:
      - {{when: 'lastResponse == "yes"', to: accept}}
{follow_up_transition}      - {{to: reject}}
  accept:
    actionType: send_message
    parameters: {{message: "Welcome aboard"}}
  reject:
    actionType: send_message
    parameters: {{message: "Goodbye"}}
{follow_up}"""
FOLLOW_UP_TRANSITION = """      - {when: 'lastResponse == "no"', to: follow_up}
"""
FOLLOW_UP = """  follow_up:
    actionType: send_message
    parameters: {message: "May we call you?"}
"""


def definition(agent: str, version: str, *, follow_up: bool = False) -> AgentDefinition:
    """The bench agent; with ``follow_up`` (the candidate), a "no" is followed up, not said goodbye to."""
    return parse_definition_text(
        DEFINITION.format(
            agent=agent,
            version=version,
            profiler=AGENT,
            follow_up_transition=FOLLOW_UP_TRANSITION if follow_up else "",
            follow_up=FOLLOW_UP if follow_up else "",
        )
    )


class Meter:
    """Wall time and CPU per role (worker, Temporal, S3 store, this process) over measured phases."""

    def __init__(self, settings: Settings, worker_pid: int) -> None:
        self.cpu = CpuMeter.for_stack(settings)
        self.cpu.processes["worker"] = psutil.Process(worker_pid)
        self.seconds = 0.0
        self.ms: dict[str, float] = {}

    async def phase(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work``, adding its wall time and its CPU to the totals."""
        before = self.cpu.sample()
        began = time.perf_counter()
        result = await work()
        self.seconds += time.perf_counter() - began
        for role, ms in per_run_ms(before, self.cpu.sample(), 1).items():
            self.ms[role] = self.ms.get(role, 0.0) + ms
        return result

    def figures(self, runs: int) -> dict[str, Any]:
        """Seconds, runs per second and CPU ms per run by role."""
        return {
            "seconds": round(self.seconds, 2),
            "runs_per_second": round(runs / self.seconds, 1),
            "cpu_ms_per_run": {role: round(ms / runs, 2) for role, ms in self.ms.items()},
        }


async def what_if_bench(settings: Settings, dsmo: DsmoClient, runs: int) -> dict[str, Any]:
    """Run a corpus of ``runs`` runs to their end, then replay it against a candidate; both measured.

    Returns:
        ``{"runs", "answers", "original": {...}, "replay": {...}, "ratio", "report_summary",
        "agent_calls": {...}, "messages": {...}, "seconds", "load_average"}``; each side with its
        seconds, runs per second and CPU ms per run by role; ``ratio`` is the replay's rate over
        the original's.
    """
    began = time.perf_counter()
    tag = uuid.uuid4().hex[:6]
    agent = queue = f"bench-whatif-{tag}"
    v1, v2 = definition(agent, "1.0.0"), definition(agent, "2.0.0", follow_up=True)
    scratch = Path(tempfile.mkdtemp(prefix="dsmo-bench-whatif-"))
    calls_file, outbox = str(scratch / "calls.txt"), scratch / "outbox"
    env = {
        **os.environ,
        **settings.to_env(),
        "DSMO_TASK_QUEUE": queue,
        "DSMO_METRICS_BIND": "off",
        "DSMO_LOAD": "bench.what_if_agents",
        "DSMO_OUTBOX_DIR": str(outbox),
        CALLS_FILE: calls_file,
    }
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dsmo.worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    run_ids = [f"whatif-{tag}-{index}" for index in range(runs)]
    answers = {run_id: "yes" if index % 2 == 0 else "no" for index, run_id in enumerate(run_ids)}
    try:
        await _warm_up(dsmo, agent, queue)
        await dsmo.publish(v1)
        warm_calls, warm_messages = len(calls(calls_file)), _sent(outbox)
        on_queue = f"TaskQueue = '{queue}' AND WorkflowVersion = '{v1.workflow_version}'"
        original = Meter(settings, worker.pid)
        await original.phase(partial(_start_all, dsmo, v1, run_ids, queue, on_queue))
        _progress(began, f"{runs} runs waiting for their reply")
        await original.phase(partial(_answer_all, dsmo, answers, on_queue))
        _progress(began, f"{runs} runs ended in {original.seconds:.0f} s; replaying them against version 2")
        after_corpus = len(calls(calls_file)), _sent(outbox)

        load = os.getloadavg()
        replay = Meter(settings, worker.pid)
        report = await replay.phase(
            partial(dsmo.what_if, f"WorkflowVersion = '{v1.workflow_version}'", v2, task_queue=queue)
        )
        load_after = os.getloadavg()
        replay_ids = [run.replay_id for run in report.runs]
        every_call = calls(calls_file)
        ours, theirs = original.figures(runs), replay.figures(runs)
        _progress(began, f"{theirs['runs_per_second']} runs replayed per second against {ours['runs_per_second']}")
        summary = report.summary()
        return {
            "runs": runs,
            "starts_and_replies_at_once": AT_ONCE,
            "replay_concurrency": REPLAY_CONCURRENCY,
            "answers": {
                "yes": sum(a == "yes" for a in answers.values()),
                "no": sum(a == "no" for a in answers.values()),
            },
            "original": ours,
            "replay": theirs,
            "ratio": theirs["runs_per_second"] / ours["runs_per_second"],
            "report_summary": summary,
            "diverged_expected": sum(answer == "no" for answer in answers.values()),
            "agent_calls": {
                "corpus": after_corpus[0] - warm_calls,
                "during_replay": len(every_call) - after_corpus[0],
                "by_replays": sum(REPLAY_MARK in run_id for run_id in every_call[warm_calls:]),
            },
            "messages": {
                "corpus": after_corpus[1] - warm_messages,
                "during_replay": _sent(outbox) - after_corpus[1],
                "to_replays": sum(_sent(outbox / replay_id) for replay_id in replay_ids),
            },
            "seconds": round(time.perf_counter() - began, 1),
            # The machine is shared: its 1/5/15-minute load as the replay began, and as it ended.
            "load_average": {"before": [round(x, 2) for x in load], "after": [round(x, 2) for x in load_after]},
        }
    finally:
        worker.terminate()
        await worker.wait()


async def _warm_up(dsmo: DsmoClient, agent: str, queue: str) -> None:
    """One run of its own version, answered and replayed: the worker and both paths warmed up."""
    warm = definition(agent, "0.0.1")
    await dsmo.publish(warm)
    run_id = await dsmo.start(warm, {}, task_queue=queue)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=120)
    await dsmo.respond(run_id, "no", event_id=f"{run_id}-reply")
    await dsmo.result(run_id)
    ended = f"WorkflowVersion = '{warm.workflow_version}' AND ExecutionStatus = 'Completed'"
    await settled_count(dsmo.temporal, ended, 1, timeout=60)
    await dsmo.what_if(f"WorkflowVersion = '{warm.workflow_version}'", definition(agent, "0.0.2"), task_queue=queue)


async def _start_all(dsmo: DsmoClient, v1: AgentDefinition, run_ids: list[str], queue: str, on_queue: str) -> None:
    """Start every run and return once visibility shows them all waiting for their reply."""
    await bounded(AT_ONCE, [partial(dsmo.start, v1, {}, run_id=run_id, task_queue=queue) for run_id in run_ids])
    waiting = f"{on_queue} AND AgentExecutionStatus = 'waiting'"
    await _settled(dsmo, waiting, len(run_ids))


async def _answer_all(dsmo: DsmoClient, answers: dict[str, str], on_queue: str) -> None:
    """Reply to every run and return once visibility shows them all ended."""
    jobs = [partial(dsmo.respond, run_id, text, event_id=f"{run_id}-reply") for run_id, text in answers.items()]
    await bounded(AT_ONCE, jobs)
    await _settled(dsmo, f"{on_queue} AND ExecutionStatus = 'Completed'", len(answers))


async def _settled(dsmo: DsmoClient, query: str, expected: int) -> None:
    """Poll visibility every 0.2 s until ``expected`` runs match ``query`` (it lags the runs a little)."""
    timeout = max(120.0, expected / 2)
    deadline = time.monotonic() + timeout
    while (await dsmo.temporal.count_workflows(query)).count < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{query}: fewer than {expected} runs after {timeout:.0f} s")
        await asyncio.sleep(0.2)


def _sent(folder: Path) -> int:
    """Messages the file channel wrote under ``folder`` (one JSON file each)."""
    return sum(1 for _ in folder.rglob("*.json")) if folder.exists() else 0


def _progress(began: float, text: str) -> None:
    print(f"  what-if, {time.perf_counter() - began:.0f} s: {text}", flush=True)
