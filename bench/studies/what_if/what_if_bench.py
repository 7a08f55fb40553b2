"""Replaying a corpus of ended runs against a candidate version, beside the corpus's own first run.

N runs of a version-1 definition shaped like a real agent (a `run_agent` stage, a message, a wait
for the reply, a transition on it, a closing message) run on one worker process and are answered,
half "yes" and half "no". Version 2 follows a "no" up instead of saying goodbye, and
`DsmoClient.what_if` replays the whole corpus against it in one call. The reference is the same
runs' own first run, measured in the same bench run on the same stack: the corpus before the
replay and half as many more of the same runs after it (so a change in the machine's load meets
both sides), each from the starts until every run waits, then from the replies until every run
has ended (the time the runs sat waiting for the bench to answer them falls between the two and
is not counted). The worker counts its agent's calls in a file (`bench.studies.what_if.what_if_agents`); the file
channel's outbox counts the messages.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from bench.jobs import bounded
from bench.studies.migrate.migration_measures import settled_count
from bench.studies.what_if.what_if_measures import AGENT, CALLS_FILE, Meter, calls, history_of, messages_in, settled
from dsmo.client import replay, what_if
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.what_if import WhatIfReport
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition

PLANNED = 200  # runs whose replay is planned again, alone, to split the replay's cost
SAMPLE = 20  # runs (and their replays) whose history size is read
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


async def what_if_bench(settings: Settings, dsmo: DsmoClient, runs: int) -> dict[str, Any]:
    """Run a corpus of ``runs`` runs to their end, replay it against a candidate, run half as many more.

    Returns:
        ``{"runs", "answers", "original": {...}, "replay": {...}, "ratio", "report_summary",
        "diverged_expected", "agent_calls", "messages", "history", "seconds", "load_average"}``;
        each side with its seconds, runs per second and CPU ms per run by process (the original
        side over the corpus and the runs after the replay, with each batch's seconds);
        ``ratio`` is the replay's rate over the original runs'.
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
        "DSMO_LOAD": "bench.studies.what_if.what_if_agents",
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
    answers = _answers(run_ids)
    again = _answers([f"whatif-{tag}-again-{index}" for index in range(max(1, runs // 2))])
    try:
        await _warm_up(dsmo, agent, queue)
        await dsmo.publish(v1)
        warm_calls, warm_messages = len(calls(calls_file)), messages_in(outbox)
        on_queue = f"TaskQueue = '{queue}' AND WorkflowVersion = '{v1.workflow_version}'"
        original = Meter(settings, worker.pid)
        await _run_to_end(original, dsmo, v1, answers, queue, on_queue, ended=runs)
        first_seconds = original.seconds
        _progress(began, f"{runs} runs ended in {first_seconds:.0f} s; replaying them against version 2")
        after_corpus = len(calls(calls_file)), messages_in(outbox)

        load = os.getloadavg()
        replay = Meter(settings, worker.pid)
        report = await replay.phase(
            partial(dsmo.what_if, f"WorkflowVersion = '{v1.workflow_version}'", v2, task_queue=queue)
        )
        load_after = os.getloadavg()
        every_call, sent = calls(calls_file), messages_in(outbox)
        replay_sent = sum(messages_in(outbox / run.replay_id) for run in report.runs)
        _progress(began, f"{runs} runs replayed in {replay.seconds:.0f} s; running {len(again)} more as a reference")
        await _run_to_end(original, dsmo, v1, again, queue, on_queue, ended=runs + len(again))
        planning = await _planning(settings, dsmo, worker.pid, run_ids[:PLANNED])
        ours, theirs = original.figures(runs + len(again)), replay.figures(runs)
        ours["batches"] = {
            "corpus": {"runs": runs, "seconds": round(first_seconds, 2)},
            "after_the_replay": {"runs": len(again), "seconds": round(original.seconds - first_seconds, 2)},
        }
        _progress(began, f"{theirs['runs_per_second']} runs replayed per second against {ours['runs_per_second']}")
        return {
            "runs": runs,
            "starts_and_replies_at_once": AT_ONCE,
            "replay_concurrency": REPLAY_CONCURRENCY,
            "answers": dict(Counter(answers.values())),
            "original": ours,
            "replay": theirs,
            "ratio": theirs["runs_per_second"] / ours["runs_per_second"],
            "planning": planning,
            "report_summary": report.summary(),
            "diverged_expected": sum(answer == "no" for answer in answers.values()),
            "agent_calls": {
                "corpus": after_corpus[0] - warm_calls,
                "during_replay": len(every_call) - after_corpus[0],
                "by_replays": sum(REPLAY_MARK in run_id for run_id in every_call[warm_calls:]),
            },
            "messages": {
                "corpus": after_corpus[1] - warm_messages,
                "during_replay": sent - after_corpus[1],
                "to_replays": replay_sent,
            },
            "history": await _histories(dsmo, report, run_ids),
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
    run_id = (await dsmo.start(warm, {}, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=120)
    await dsmo.respond(run_id, "no", event_id=f"{run_id}-reply")
    await dsmo.result(run_id)
    ended = f"WorkflowVersion = '{warm.workflow_version}' AND ExecutionStatus = 'Completed'"
    await settled_count(dsmo.temporal, ended, 1, timeout=60)
    await dsmo.what_if(f"WorkflowVersion = '{warm.workflow_version}'", definition(agent, "0.0.2"), task_queue=queue)


def _answers(run_ids: list[str]) -> dict[str, str]:
    """Each run's reply: "yes" and "no" in turn."""
    return {run_id: "yes" if index % 2 == 0 else "no" for index, run_id in enumerate(run_ids)}


async def _run_to_end(
    meter: Meter,
    dsmo: DsmoClient,
    v1: AgentDefinition,
    answers: dict[str, str],
    queue: str,
    on_queue: str,
    *,
    ended: int,
) -> None:
    """Start the runs and, once all wait, answer them; measured, the time they sat waiting not."""
    await meter.phase(partial(_start_all, dsmo, v1, list(answers), queue, on_queue))
    await meter.phase(partial(_answer_all, dsmo, answers, on_queue, ended))


async def _planning(settings: Settings, dsmo: DsmoClient, worker_pid: int, run_ids: list[str]) -> dict[str, Any]:
    """What planning a replay costs alone, per run: what `what_if` does before it starts the replay.

    Reading the run's status, its trail and its definition, at the replay's concurrency.
    """
    store = artifact_store(settings)
    meter = Meter(settings, worker_pid)
    plans = [partial(replay.plan_replay, dsmo.core, store, run_id) for run_id in run_ids]
    await meter.phase(partial(bounded, REPLAY_CONCURRENCY, plans))
    return {"runs": len(run_ids)} | meter.figures(len(run_ids))


async def _histories(dsmo: DsmoClient, report: WhatIfReport, run_ids: list[str]) -> dict[str, Any]:
    """History sizes of up to `SAMPLE` runs spread over the corpus, and of their replays."""
    spread = set(run_ids[:: max(1, len(run_ids) // SAMPLE)])
    sampled = [run for run in report.runs if run.run_id in spread]
    return {
        "sampled": len(sampled),
        "original": await history_of(dsmo, [run.run_id for run in sampled]),
        "replay": await history_of(dsmo, [run.replay_id for run in sampled]),
    }


async def _start_all(dsmo: DsmoClient, v1: AgentDefinition, run_ids: list[str], queue: str, on_queue: str) -> None:
    """Start every run and return once visibility shows them all waiting for their reply."""
    await bounded(AT_ONCE, [partial(dsmo.start, v1, {}, run_id=run_id, task_queue=queue) for run_id in run_ids])
    waiting = f"{on_queue} AND AgentExecutionStatus = 'waiting'"
    await settled(dsmo, waiting, len(run_ids))


async def _answer_all(dsmo: DsmoClient, answers: dict[str, str], on_queue: str, ended: int) -> None:
    """Reply to every run and return once visibility shows ``ended`` runs of the queue completed."""
    jobs = [partial(dsmo.respond, run_id, text, event_id=f"{run_id}-reply") for run_id, text in answers.items()]
    await bounded(AT_ONCE, jobs)
    await settled(dsmo, f"{on_queue} AND ExecutionStatus = 'Completed'", ended)


def _progress(began: float, text: str) -> None:
    print(f"  what-if, {time.perf_counter() - began:.0f} s: {text}", flush=True)
