"""The status of a run Temporal no longer has, read from the trail it exported (`trail_view`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dsmo.client.status_views import trail_view
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.contracts.run_records import AuditEvent

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def event(seq: int, kind: Any, **data: Any) -> AuditEvent:
    return AuditEvent(
        seq=seq, type=kind, run_id="r-1", at=START + timedelta(minutes=seq), workflow_version="v1", data=data
    )


def test_a_run_that_gave_its_slot_back_after_its_ending_shows_that_ending() -> None:
    trail = [
        event(1, "RUN_CREATED", agent="keyed"),
        event(2, "RUN_ABORTED", status="failed", resultType="failure"),
        event(3, "SLOT_GIVEN_BACK", key="k", limit=1),
    ]
    view = trail_view("r-1", trail, lambda version: f"s3://b/{version}", erased=False)
    assert (view.status, view.result_type, view.completed_at) == (RunStatus.FAILED, "failure", trail[1].at)
    assert view.agent == "keyed" and view.started_at == trail[0].at


def test_a_trail_with_no_ending_recorded_shows_its_last_event() -> None:
    trail = [event(1, "RUN_CREATED", agent="cut"), event(2, "RUN_WAITING")]
    view = trail_view("r-1", trail, lambda version: version, erased=True)
    assert (view.status, view.completed_at) == (RunStatus.COMPLETED, trail[1].at)
