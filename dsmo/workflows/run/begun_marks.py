"""Which local attempts need a `begun.json` mark, and which must look for their output first.

A local attempt writes a small mark before its agent runs, so that the worker running it again
after a crash (the workflow task's record of local attempts dies with its worker) can tell an
attempt that began and never finished (a failed attempt, `WorkerLost`) and reuse one that
committed. One mark per workflow task is enough for a chain of local stages run one after
another in it. A workflow task makes the same decisions in the same order when it runs again,
and the attempts it schedules before any of them has resolved are the same each time, so each
of those always marks. If they all did their own work (their marks were new), no attempt later
in the task can have begun before either, and one scheduled with nothing else in flight skips
its mark (`SKIP`). When one was reused or failed, the task may be running again after a crash:
every later attempt in it marks and looks for an output it committed before, even if its mark
is new, since it may have run without one (`RECHECK`); so does one beside another in flight.

The choice only changes what a stage task asks of its worker, never the commands the workflow
sends, so it is safe for histories recorded before it.
"""

from __future__ import annotations

from dsmo.workflows.contracts.activity_io import MARK, RECHECK, SKIP, BegunMark


class BegunMarks:
    """Tracks, in one workflow task, whether its local attempts so far all did their own work.

    Each method takes the workflow task it is called in, named by its history length
    (``workflow.info().get_current_history_length()``: the same for every activation of one task,
    on replay too). A task run again after a crash or a failure runs in a new workflow instance,
    so in a new `BegunMarks`.
    """

    def __init__(self) -> None:
        self._task = -1  # the workflow task the state below is about
        self._clean: bool | None = None  # None: no local attempt of this task has resolved yet
        self._in_flight = 0

    def _enter(self, task: int) -> None:
        if task != self._task:
            self._task, self._clean = task, None

    def mark_for(self, task: int) -> BegunMark:
        """What a local attempt scheduled now in ``task`` does about its begun mark."""
        self._enter(task)
        if self._clean is None:
            return MARK
        return SKIP if self._clean and self._in_flight == 0 else RECHECK

    def started(self) -> None:
        """A local attempt is scheduled."""
        self._in_flight += 1

    def ended(self, began_in: int, task: int, *, did_own_work: bool) -> None:
        """A local attempt scheduled in ``began_in`` resolved in ``task``; ``did_own_work``: it ran
        its agent and committed a new output (not reused, not failed)."""
        self._in_flight -= 1
        self._enter(task)
        # An attempt that began in an earlier workflow task vouches for nothing in this one.
        fresh = did_own_work and began_in == task
        self._clean = fresh if self._clean is None else self._clean and fresh
