"""`hand_over_round_trip`: an activity that does nothing; what counts is the server's answer.

A run about to continue as new calls it so that the workflow task deciding the hand-over is one
the server starts for the activity's completion, with every event sent to the run before it (a
cancel among them); see `dsmo/workflows/engine/hand_over.py`. A short timer would do the same,
but the server fires a 1 ms timer ~200 ms late on the embedded stack (its timer queue reads
every 50 ms at best), against ~2 ms for this round trip: the activity comes back in the reply to
the task that scheduled it (eager execution) and answers at once.
"""

from __future__ import annotations

from temporalio import activity

from dsmo.workflows.contracts.activity_io import HAND_OVER_ROUND_TRIP


@activity.defn(name=HAND_OVER_ROUND_TRIP)
async def hand_over_round_trip() -> None:
    """Return at once (async: it takes no activity thread)."""
