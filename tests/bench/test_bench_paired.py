"""The paired harness for real: PostgreSQL from pgserver, consumer processes, DSMO's worker, faults.

A consumer that dies between processing and acknowledging makes the broker redeliver: the shared
execution log then shows the stage executed twice, the chain after it duplicated, and the
executions after the run's end counted as orphans by both rules. The same post-work faults on
B3's terminal stage leave no orphan: a crash SIGKILLs B3's worker process (its supervisor starts
another), the attempt never completes and Temporal's timeout starts the next one; a lost
completion's next attempt reports the committed output.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from bench.b3_process import b3_worker
from bench.paired import RATES, Input, draw, inputs_for, trajectory
from bench.queue_db import Message, QueueDb, postgres
from bench.queue_modes import QueueModes
from bench.runner import Bench, BenchConfig
from bench.shared_rule import OK, judge
from dsmo.activities.artifacts import ArtifactStore
from dsmo.config.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with postgres(tmp_path_factory.mktemp("queue")) as found:
        yield found


def faulted_input(workload: str, stage: str, kind: str) -> tuple[int, str, str]:
    """A seed and an input (route b) whose first attempt of ``stage`` meets ``kind``, and nothing
    else strikes its path's first attempts or that stage's second."""
    path = trajectory(workload, "b")
    for seed in range(2000):
        for item in inputs_for(workload, 20, seed):
            if item.route != "b":
                continue
            drawn = [draw(RATES[workload], seed, item.input_id, each, 1) for each in path]
            later = draw(RATES[workload], seed, item.input_id, stage, 2)
            if drawn == [kind if each == stage else None for each in path] and later is None:
                return seed, item.input_id, item.route
    raise AssertionError(f"no seed gives a {kind} on {stage}")


async def test_a_consumer_crash_is_redelivered_duplicated_and_orphaned(
    dsn: str, stack_settings: Settings, store: ArtifactStore
) -> None:
    seed, input_id, route = faulted_input("W3", "B", "crash")
    db = QueueDb(dsn)
    queue = QueueModes(db, dsn, stack_settings, store, seed, ambiguity=0.0, consumers=2)
    run_id = f"b1-crash-{input_id}"
    document = {"route": route, "input": input_id, "workload": "W3"}
    stored = store.put_json_once(f"artifacts/bench-b1/{run_id}/input.json", document)
    async with queue.serving("b1"):
        ended = await queue.run("b1", "W3", run_id, input_id, 0, stored.uri)
    assert ended is not None and queue.restarts >= 1

    executions = db.executions(run_id)
    completions = Counter(e.stage for e in executions if e.outcome == OK)
    assert completions["B"] == 2 and completions["D"] == 2, completions  # redelivered, and its chain again
    assert {e.attempt for e in executions if e.stage == "B"} == {1, 2}
    verdict = judge(executions, trajectory("W3", route), ended_at=db.endings([run_id])[run_id])
    assert verdict.valid_path and verdict.path == ["A", "B", "D"] and verdict.terminal_completed
    assert verdict.duplicates == 2 and verdict.orphans == 2  # the second B and D started after the end
    assert verdict.orphans_lineage == 2
    # Each execution names the one that enqueued it: both Bs came from A's message, each D from one B.
    by_stage = {stage: [e for e in executions if e.stage == stage] for stage in ("A", "B", "D")}
    assert {e.parent for e in by_stage["B"]} == {by_stage["A"][0].exec_id}
    assert {e.parent for e in by_stage["D"]} == {e.exec_id for e in by_stage["B"]}
    # ... and the fault it drew, keyed as every mode keys it.
    assert {(e.fault_key, e.fault) for e in by_stage["B"]} == {
        (f"{input_id}|B|1", "crash"),
        (f"{input_id}|B|2", ""),
    }
    assert db.pending("b1") == 0


@pytest.mark.parametrize(("kind", "executions_of_d"), [("crash", 2), ("lost_ack", 1)])
async def test_a_post_work_fault_on_b3_s_terminal_stage_leaves_no_orphan(
    dsn: str, stack_settings: Settings, kind: str, executions_of_d: int
) -> None:
    seed, input_id, route = faulted_input("W3", "D", kind)
    settings = stack_settings.with_changes(worker={"metrics_bind": "", "sandbox": False})
    bench = Bench(settings, BenchConfig(seed=seed, replays=0), progress=lambda _: None)
    db = QueueDb(dsn)
    worker = b3_worker(settings, dsn=dsn, seed=seed, task_queue=bench.table1_queue, slots=4)
    async with bench.workers(), worker as b3:
        [run] = await bench._b3_input("W3", Input(input_id, route), 0, uuid.uuid4().hex[:6])
        record = await bench._record(db, "B3", "W3", run)
    # A crash is a real death of the worker process, which its supervisor started again.
    assert (b3.deaths.kills, b3.deaths.exits) == ((1, 0) if kind == "crash" else (0, 0))
    trail = bench._audit_trail(run.run_id)
    failed = [e for e in trail if e["type"] == "STAGE_FAILED"]
    # No completion reached Temporal: the attempt timed out (not an error the agent raised).
    assert [(e["stage"], e["attempt"], e["data"]["errorType"]) for e in failed] == [("D", 1, "Timeout")]
    ran = [e for e in db.executions(run.run_id) if e.stage == "D"]
    assert len(ran) == executions_of_d and {e.fault for e in ran} == ({kind, ""} if kind == "crash" else {kind})
    committed = next(e for e in trail if e["type"] == "STAGE_SUCCEEDED" and e["stage"] == "D")
    # A crash's work was lost with its worker: the second attempt ran again. A lost completion's
    # output was committed: the second attempt reported it without running the agent.
    assert committed["attempt"] == (2 if kind == "crash" else 1) and committed["data"]["reused"] is (kind != "crash")
    assert record.success and record.dlq == 0 and record.orphans_lineage == 0 and record.orphans == 0
    assert record.duplicates == executions_of_d - 1
    assert record.attempts == ["A:ok", "B:ok", *(["D:ok"] * executions_of_d)]


def take(db: QueueDb, mode: str) -> Message:
    """The next message of ``mode``, once visible (messages appear after a small random delay)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = db.receive(mode)
        if found is not None:
            return found
        time.sleep(0.01)
    raise AssertionError("nothing to take")


def test_b1_prime_enqueues_a_stage_once_in_the_transaction_of_its_ack(dsn: str) -> None:
    db = QueueDb(dsn)
    run_id = f"b1p-dedup-{uuid.uuid4().hex[:6]}"
    db.enqueue("b1p", run_id, "w1-0001", 0, "W1", "A", {"uri": "in", "hops": 0})
    first = take(db, "b1p")
    assert first.run_id == run_id
    db.enqueue_and_ack(first, "B", {"uri": "a", "hops": 1})
    # A redelivery of the same stage (its ack lost) gets here again: nothing more is enqueued.
    db.enqueue("b1p", run_id, "w1-0001", 0, "W1", "A", {"uri": "in", "hops": 0})
    again = take(db, "b1p")
    while again.stage != "A":  # B may come first: put it back at once
        db.retry_later(again)
        again = take(db, "b1p")
    db.enqueue_and_ack(again, "B", {"uri": "a", "hops": 1})
    assert db.pending("b1p") == 1 and db.counts(run_id)[0] == 3  # the two As and one B
    # The chain's end and its ack, in one transaction too: what the bench reads the result from.
    db.enqueue_and_ack(take(db, "b1p"), None, {}, end_uri="c")
    assert db.pending("b1p") == 0 and db.result_uri(run_id) == "c" and run_id in db.endings([run_id])
