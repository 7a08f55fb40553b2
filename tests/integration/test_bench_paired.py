"""The paired harness's queue, for real: PostgreSQL from pgserver, consumer processes, a crash.

A consumer that dies between processing and acknowledging makes the broker redeliver: the shared
execution log then shows the stage executed twice, the chain after it duplicated, and the
executions after the run's end counted as orphans by the shared rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from bench.paired import RATES, draw, inputs_for, trajectory
from bench.queue_db import QueueDb, postgres
from bench.queue_modes import QueueModes
from bench.shared_rule import OK, judge
from dsmo.activities.artifacts import ArtifactStore
from dsmo.starter.config.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with postgres(tmp_path_factory.mktemp("queue")) as found:
        yield found


def crashing_input(workload: str) -> tuple[int, str, str]:
    """A seed and an input whose first delivery of B crashes its consumer (and nothing else strikes)."""
    for seed in range(500):
        for item in inputs_for(workload, 20, seed):
            if item.route != "b":
                continue
            drawn = [draw(RATES[workload], seed, item.input_id, 0, stage, 1) for stage in ("A", "B", "D")]
            later = draw(RATES[workload], seed, item.input_id, 0, "B", 2)
            if drawn == [None, "crash", None] and later is None:
                return seed, item.input_id, item.route
    raise AssertionError("no seed gives a crash on B")


async def test_a_consumer_crash_is_redelivered_duplicated_and_orphaned(
    dsn: str, stack_settings: Settings, store: ArtifactStore
) -> None:
    seed, input_id, route = crashing_input("W3")
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
    verdict = judge(executions, trajectory("W3", route))
    assert verdict.success and verdict.path == ["A", "B", "D"]
    assert verdict.duplicates == 2 and verdict.orphans == 2  # the second B and D started after the end
    assert db.pending("b1") == 0
