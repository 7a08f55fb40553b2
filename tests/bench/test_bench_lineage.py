"""Orphans by lineage, the sequence of states, B3's lineage from its trail, and the pairing check."""

from __future__ import annotations

from typing import Any

import pytest

from bench.pairing import PairingBroken, compare
from bench.scheduled import UNSCHEDULED, scheduled_lineage
from bench.shared_rule import ROOT, StageExecution, judge

W1 = ["A", "B", "C"]


def ex(exec_id: str, stage: str, parent: str, started: float, finished: float, outcome: str = "ok") -> StageExecution:
    return StageExecution("r", stage, 1, "c1", outcome, started, finished, exec_id=exec_id, parent=parent)


def test_a_clean_chain_is_linked_and_its_sequence_is_its_attempts() -> None:
    log = [ex("a", "A", ROOT, 0, 1), ex("b", "B", "a", 1, 2), ex("c", "C", "b", 2, 3)]
    verdict = judge(log, W1, ended_at=3.1)
    assert (verdict.orphans_lineage, verdict.orphans, verdict.duplicates) == (0, 0, 0)
    assert verdict.attempts == ["A:ok", "B:ok", "C:ok"] and verdict.terminal_completed


def test_a_crash_on_the_terminal_stage_of_the_queue_leaves_a_late_orphan() -> None:
    # B1: C worked, ended the run, then its consumer died before the ack; C ran again 1.5 s later.
    log = [ex("a", "A", ROOT, 0, 1), ex("b", "B", "a", 1, 2), ex("c1", "C", "b", 2, 3), ex("c2", "C", "b", 4.5, 5)]
    verdict = judge(log, W1, ended_at=3.0)
    assert (verdict.orphans_lineage, verdict.orphans, verdict.duplicates) == (1, 1, 1)
    assert verdict.attempts == ["A:ok", "B:ok", "C:ok", "C:ok"]  # the late execution is a state of the run too
    assert verdict.retries == [("ok", 2.5)]  # C's redelivery started 2.5 s after C


def test_a_redelivered_chain_before_the_end_is_outside_the_accepted_lineage() -> None:
    # A lost ack on B: B ran twice; each enqueued a C. The run ended with the first chain's C;
    # the second chain's C started before that end but follows an execution the run never used.
    log = [
        ex("a", "A", ROOT, 0, 1),
        ex("b1", "B", "a", 1, 2),
        ex("b2", "B", "a", 1.6, 2.2),
        ex("c1", "C", "b1", 2, 3),
        ex("c2", "C", "b2", 2.3, 3.4),
    ]
    verdict = judge(log, W1, ended_at=3.0)
    # The first rule only sees executions after the end; lineage also sees c2 off the accepted chain.
    assert verdict.orphans == 0 and verdict.orphans_lineage == 1
    assert verdict.attempts == ["A:ok", "B:ok", "B:ok", "C:ok", "C:ok"]


def test_a_loop_back_is_orphaned_by_lineage_though_every_stage_is_on_the_trajectory() -> None:
    # B2's router sent the run from B back to A once: A, B, A, B, C.
    log = [
        ex("a1", "A", ROOT, 0, 1),
        ex("b1", "B", "a1", 1, 2),
        ex("a2", "A", "b1", 2, 3),
        ex("b2", "B", "a2", 3, 4),
        ex("c", "C", "b2", 4, 5),
    ]
    verdict = judge(log, W1, ended_at=5.0)
    assert verdict.orphans == 0 and verdict.orphans_lineage == 3  # a2 and what followed it
    assert verdict.terminal_completed and not verdict.valid_path  # completed, by the wrong path


def test_retries_and_failures_are_in_the_sequence_of_states() -> None:
    log = [
        ex("a", "A", ROOT, 0, 1),
        ex("b1", "B", "a", 1, 1.1, outcome="transient"),
        ex("b2", "B", "a", 1.3, 2),
        ex("c", "C", "b2", 2, 3, outcome="permanent"),
    ]
    verdict = judge(log, W1, ended_at=3.0)
    assert verdict.attempts == ["A:ok", "B:transient", "B:ok", "C:permanent"]
    assert not verdict.terminal_completed and verdict.orphans_lineage == 0


def test_an_execution_whose_parent_is_unknown_is_not_linked() -> None:
    log = [ex("a", "A", ROOT, 0, 1), ex("b", "B", "nobody", 1, 2), ex("c", "C", "b", 2, 3)]
    assert judge(log, W1, ended_at=3.0).orphans_lineage == 2


def trail_event(
    seq: int, kind: str, stage: str | None = None, attempt: int | None = None, at: str = ""
) -> dict[str, Any]:
    return {"seq": seq, "type": kind, "stage": stage, "attempt": attempt, "at": at or "2026-11-26T10:00:00Z"}


def test_b3_parents_come_from_its_scheduling_events() -> None:
    # B's first attempt worked but its completion never arrived; the second was committed.
    trail = [
        trail_event(1, "RUN_CREATED"),
        trail_event(2, "STAGE_ENQUEUED", "A", 1),
        trail_event(3, "STAGE_SUCCEEDED", "A", 1),
        trail_event(4, "STAGE_ENQUEUED", "B", 1),
        trail_event(5, "STAGE_FAILED", "B", 1),
        trail_event(6, "STAGE_ENQUEUED", "B", 2),
        trail_event(7, "STAGE_SUCCEEDED", "B", 2),
        trail_event(8, "STAGE_ENQUEUED", "C", 1),
        trail_event(9, "STAGE_SUCCEEDED", "C", 1),
        trail_event(10, "RUN_COMPLETED", at="2026-11-26T10:00:05+00:00"),
    ]
    lineage = scheduled_lineage(list(reversed(trail)))  # read in sequence order, whatever the order given
    assert lineage.parents == {"A:1": ROOT, "B:1": "A:1", "B:2": "A:1", "C:1": "B:2"}
    assert lineage.accepted == {"A:1", "B:2", "C:1"}
    assert lineage.ended_at == pytest.approx(1795687205.0)
    log = [
        ex("A:1", "A", lineage.parents["A:1"], 0, 1),
        ex("B:1", "B", lineage.parents["B:1"], 1, 2),
        ex("B:2", "B", lineage.parents["B:2"], 2.7, 3),
        ex("C:1", "C", lineage.parents["C:1"], 3, 4),
        ex("X:1", "C", UNSCHEDULED, 3, 4),
    ]
    verdict = judge(log[:4], W1, ended_at=4.5, accepted=lineage.accepted)
    assert (verdict.orphans_lineage, verdict.duplicates) == (0, 1)  # a duplicate, not an orphan
    assert judge(log, W1, ended_at=4.5, accepted=lineage.accepted).orphans_lineage == 1


def test_pairing_holds_when_every_key_drew_one_fault() -> None:
    report = compare(
        {
            "B3": [("b3-1", "w3-1|0|A|1", ""), ("b3-1", "w3-1|0|B|1", "crash"), ("b3-1", "w3-1|0|B|2", "")],
            "B1": [
                ("b1-1", "w3-1|0|A|1", ""),
                ("b1-1", "w3-1|0|B|1", "crash"),
                ("b1-1", "w3-1|0|B|2", ""),
                ("b1-1", "w3-1|0|B|2", ""),  # a redelivery
            ],
            "B2": [("b2-1", "w3-1|0|A|1", ""), ("b2-1", "w3-1|0|B|1", "crash"), ("b2-1", "w3-1|0|C|1", "slow")],
        }
    )
    assert report["shared"] == 2 and report["shared_faults"] == {"crash": 1, "none": 1}
    assert report["faults"]["B1"] == {"crash": 1, "none": 2} and report["faults"]["B2"] == {
        "crash": 1,
        "none": 1,
        "slow": 1,
    }


def test_a_key_that_drew_two_faults_breaks_the_pairing() -> None:
    with pytest.raises(PairingBroken, match=r"w3-1\|0\|B\|1: B3 met crash, B1 met no fault"):
        compare({"B3": [("b3-1", "w3-1|0|B|1", "crash")], "B1": [("b1-1", "w3-1|0|B|1", "")]})


def test_a_key_of_another_replay_or_a_missing_start_breaks_the_pairing() -> None:
    with pytest.raises(PairingBroken, match=r"logged by b3-1.replay-2, replay 2"):
        compare({"B3": [("b3-1.replay-2", "w3-1|0|A|1", "")]})
    with pytest.raises(PairingBroken, match="did not all start the same inputs and replays"):
        compare(
            {
                "B3": [("b3-1", "w3-1|0|A|1", ""), ("b3-1.replay-1", "w3-1|1|A|1", "")],
                "B1": [("b1-1", "w3-1|0|A|1", "")],
            }
        )
