"""The console's task list against real Temporal visibility: filters, pages, the new search attributes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsmo.client.task_counts import TaskCounts
from dsmo.client.task_list import TaskFilter, task_page
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from
from tests.polling import until_value

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


async def settled(harness: Harness, filters: TaskFilter, count: int) -> None:
    """Until visibility (eventually consistent) lists ``count`` tasks for ``filters``."""
    await until_value(
        lambda: task_page(harness.dsmo.core, filters, datetime.now(UTC)),
        lambda page: page.total == count,
        f"visibility lists {count} tasks for {filters}",
        seconds=120,
    )


async def test_tasks_are_filtered_and_paged_from_visibility(harness: Harness) -> None:
    tag = uuid.uuid4().hex[:6]
    definition = definition_from(EXAMPLES / "onboarding.yaml")
    replies, documents = [], []
    for index in range(3):
        run_id = f"tasks-{tag}-r{index}"
        await harness.start(
            definition, {"candidate": {"id": index, "name": "A", "phone": "1", "email": f"{tag}@x.com"}}, run_id=run_id
        )
        replies.append(run_id)
    run_id = f"tasks-{tag}-d0"
    await harness.start(
        definition, {"candidate": {"id": 9, "name": "B", "phone": "2", "email": f"{tag}@x.com"}}, run_id=run_id
    )
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await harness.dsmo.respond(run_id, "sí")
    documents.append(run_id)

    mine = TaskFilter(run=f"tasks-{tag}-")
    await settled(harness, TaskFilter(run=f"tasks-{tag}-", kind="document"), 1)
    await settled(harness, mine, 4)
    now = datetime.now(UTC)

    only_documents = await task_page(harness.dsmo.core, TaskFilter(run=f"tasks-{tag}-", kind="document"), now)
    [task] = only_documents.tasks
    assert (task.run_id, task.kind, task.assignee, task.agent) == (
        documents[0],
        "document",
        f"{tag}@x.com",
        "employee-onboarding",
    )
    assert task.due is not None and task.due > now and task.since is not None and task.since <= now
    on_candidate = await task_page(harness.dsmo.core, TaskFilter(run=f"tasks-{tag}-", assignee="candidate"), now)
    assert sorted(task.run_id for task in on_candidate.tasks) == replies

    # Two to a page: every task once, in two pages, the second without a next one.
    first = await task_page(harness.dsmo.core, mine, now, page_size=2)
    assert len(first.tasks) == 2 and first.total == 4 and first.next_page
    second = await task_page(harness.dsmo.core, mine, now, page=first.next_page, page_size=2)
    assert {task.run_id for task in first.tasks + second.tasks} == {*replies, *documents}
    assert (await task_page(harness.dsmo.core, TaskFilter(run=f"tasks-{tag}-", overdue=True), now)).total == 0

    # A run that ends leaves the list, and its wait's assignee and start are cleared.
    await harness.dsmo.cancel(replies[0], reason="test")
    await settled(harness, mine, 3)
    attributes = (await harness.dsmo.temporal.get_workflow_handle(replies[0]).describe()).typed_search_attributes
    assert attributes.get(sa.WAITING_ON) is None and attributes.get(sa.WAITING_SINCE) is None
    assert attributes.get(sa.AGENT_EXECUTION_STATUS) == "cancelled"


async def test_a_kept_total_is_reused_until_forgotten_while_rows_are_read_fresh(harness: Harness) -> None:
    tag = uuid.uuid4().hex[:6]
    definition = definition_from(EXAMPLES / "onboarding.yaml")
    runs = [f"tasks-{tag}-k{index}" for index in range(2)]
    for index, run_id in enumerate(runs):
        candidate = {"id": index, "name": "A", "phone": "1", "email": f"{tag}@x.com"}
        await harness.start(definition, {"candidate": candidate}, run_id=run_id)
    mine = TaskFilter(run=f"tasks-{tag}-")
    await settled(harness, mine, 2)
    counts = TaskCounts(fresh_for=3600)  # nothing goes stale during the test: only `forget` recounts
    pages = await asyncio.gather(*(task_page(harness.dsmo.core, mine, datetime.now(UTC), counts=counts) for _ in "ab"))
    assert [page.total for page in pages] == [2, 2]

    await harness.dsmo.cancel(runs[0], reason="test")
    await settled(harness, mine, 1)  # uncached: visibility has dropped the run
    kept = await task_page(harness.dsmo.core, mine, datetime.now(UTC), counts=counts)
    assert kept.total == 2 and [task.run_id for task in kept.tasks] == [runs[1]]
    counts.forget()
    assert (await task_page(harness.dsmo.core, mine, datetime.now(UTC), counts=counts)).total == 1
