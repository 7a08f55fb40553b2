"""Which local attempts mark, skip their mark, or mark and look for their output: what a
workflow task can vouch for."""

from __future__ import annotations

from dsmo.workflows.contracts.activity_io import MARK, RECHECK, SKIP, BegunMark
from dsmo.workflows.run.begun_marks import BegunMarks


def run_one(marks: BegunMarks, task: int, *, did_own_work: bool = True, resolved_in: int | None = None) -> BegunMark:
    """Schedule one local attempt in ``task`` and resolve it; what it was told about its mark."""
    told = marks.mark_for(task)
    marks.started()
    marks.ended(task, task if resolved_in is None else resolved_in, did_own_work=did_own_work)
    return told


def test_a_chain_in_one_workflow_task_marks_only_its_first_attempt() -> None:
    marks = BegunMarks()
    assert [run_one(marks, 3) for _ in range(4)] == [MARK, SKIP, SKIP, SKIP]


def test_every_new_workflow_task_marks_its_first_attempt_again() -> None:
    marks = BegunMarks()
    assert [run_one(marks, 3), run_one(marks, 3)] == [MARK, SKIP]
    assert [run_one(marks, 9), run_one(marks, 9)] == [MARK, SKIP]


def test_after_a_reused_or_failed_attempt_the_rest_of_the_task_marks_and_looks_for_its_output() -> None:
    # After a crash the task's first attempt finds its mark and reuses its output: a later attempt
    # of the task may have run before without a mark, so each marks and looks for its output.
    marks = BegunMarks()
    assert run_one(marks, 3, did_own_work=False) == MARK
    assert [run_one(marks, 3) for _ in range(3)] == [RECHECK] * 3
    failed = BegunMarks()
    assert [run_one(failed, 3), run_one(failed, 3, did_own_work=False), run_one(failed, 3)] == [MARK, SKIP, RECHECK]


def test_the_first_wave_marks_and_an_attempt_beside_another_in_flight_rechecks() -> None:
    marks = BegunMarks()
    assert marks.mark_for(3) == MARK
    marks.started()
    assert marks.mark_for(3) == MARK  # parallel branches before any attempt resolved: all mark
    marks.started()
    marks.ended(3, 3, did_own_work=True)
    assert marks.mark_for(3) == RECHECK  # one resolved, the other still in flight
    marks.ended(3, 3, did_own_work=True)
    assert marks.mark_for(3) == SKIP


def test_an_attempt_that_spans_two_workflow_tasks_vouches_for_neither() -> None:
    marks = BegunMarks()
    run_one(marks, 3)
    assert run_one(marks, 3, resolved_in=7) == SKIP  # it resolved in task 7: it began in task 3
    assert marks.mark_for(7) == RECHECK
