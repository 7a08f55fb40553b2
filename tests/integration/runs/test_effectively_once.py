"""Effectively once under concurrency: one writer wins a key, an event applies once however it
is delivered, a run id names one run."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dsmo.client.client_errors import RunAlreadyExists
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "candidate_screening.yaml"


# SeaweedFS queues conditional PUTs to one key behind a lock that a waiting request retries about
# once a second, so the wait grows with the writers per key: with 32 on one key the last one
# waited past the client's 30 s request timeout (measured: 4 per key, at most ~2 s; 8 per key, ~6 s).
# So the 32 writers race all at once, 4 to each of 8 keys: a duplicate attempt's contention, doubled.
def test_32_concurrent_conditional_writes_one_wins_per_key(harness: Harness) -> None:
    keys = [f"race/{uuid.uuid4().hex}/output.json" for _ in range(8)]
    writers = [(key, n) for key in keys for n in range(4)]
    with ThreadPoolExecutor(max_workers=len(writers)) as pool:
        results = list(pool.map(lambda w: (w[0], harness.store.put_json_once(w[0], {"writer": w[1]})), writers))
    for key in keys:
        outcomes = [r for k, r in results if k == key]
        winners = [r for r in outcomes if r.created]
        assert len(winners) == 1
        assert all(r.sha256 == winners[0].sha256 for r in outcomes)  # every loser reports the winner's content
        stored = harness.store.read_json(harness.store.uri(key))
        assert stored == {"writer": stored["writer"]}


async def test_the_same_event_ten_times_mixed_applies_once(harness: Harness) -> None:
    dsmo = harness.dsmo
    run_id = await harness.start(definition_from(EXAMPLE), {"candidate": {"name": "C", "phone": "1"}})
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    payload = {"event_id": "once", "text": "sí"}

    async def by_update() -> object:
        try:
            return await dsmo.respond(run_id, "sí", event_id="once")
        except Exception as err:  # noqa: BLE001 - the run may already have ended: that is fine here
            return err

    deliveries = [by_update() if n % 2 else dsmo.signal_event(run_id, "MESSAGE_RECEIVED", payload) for n in range(10)]
    await asyncio.gather(*deliveries)
    result = await dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED and result.variables["lastResponse"] == "sí"
    events = await dsmo.events(run_id)
    assert [e.type for e in events].count("RUN_RESUMED") == 1
    assert len(harness.messages(run_id)) == 2  # the goodbye went out once


async def test_two_starts_with_one_run_id_make_one_run(harness: Harness) -> None:
    run_id = f"single-{uuid.uuid4().hex[:8]}"
    definition = definition_from(EXAMPLE)
    outcomes = await asyncio.gather(
        *(harness.start(definition, {"candidate": {"name": "D", "phone": "1"}}, run_id=run_id) for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["RunAlreadyExists", "str"]
    assert [o for o in outcomes if not isinstance(o, RunAlreadyExists)] == [run_id]
    listed = [w async for w in harness.dsmo.temporal.list_workflows(f"WorkflowId='{run_id}'")]
    assert len({w.run_id for w in listed}) <= 1
