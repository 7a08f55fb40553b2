"""`dsmo cancel` on a run that had decided to fail before the cancel reached it: one line, exit 1.

The run could not get its slot (the service refused it), so it ends failed; the cancel lands
while it writes its dead letter and cannot change that ending (docs/concepts.md).
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType

from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness
from tests.integration.cli.test_cli import cli, one_line_error
from tests.integration.runs.test_cancel_after_the_ending_is_decided import deciding_to_fail
from tests.polling import until

pytestmark = pytest.mark.integration


async def test_a_cancel_too_late_to_change_a_failed_ending_says_so(harness: Harness) -> None:
    dsmo = harness.dsmo
    async with deciding_to_fail(harness, "too-late") as (run_id, held):
        cancel = asyncio.ensure_future(cli(harness, "cancel", run_id, "--reason", "customer withdrew"))

        async def cancel_requested() -> bool:
            history = await dsmo.temporal.get_workflow_handle(run_id).fetch_history()
            kinds = [event.event_type for event in history.events]
            return EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in kinds

        await until(cancel_requested, "the cancel reached the run")
        held.let_go.set()
        proc = await cancel
    assert (await dsmo.result(run_id)).status is RunStatus.FAILED
    one_line_error(proc, f"{run_id} ended failed before the cancel took effect", "cannot change")
    assert proc.returncode == 1
    assert proc.stdout == "", proc.stdout  # no `failed: RUN by None (None)`
