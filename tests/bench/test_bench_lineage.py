"""Orphans by lineage, the sequence of states, B3's lineage from its trail, and the pairing check."""

from __future__ import annotations

from typing import Any

import pytest

from bench.paired import RATES, draw, fault_key, inputs_for
from bench.pairing import PairingBroken, compare
from bench.scheduled import trail_end, trail_result
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
    assert (verdict.unlinked, verdict.late) == (0, 1)  # linked, but after the end: one column each
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


def test_b3_s_end_comes_from_its_trail() -> None:
    trail = [
        trail_event(1, "RUN_CREATED"),
        trail_event(2, "STAGE_ENQUEUED", "A", 1),
        trail_event(3, "STAGE_SUCCEEDED", "A", 1),
        trail_event(4, "RUN_COMPLETED", at="2026-11-26T10:00:05+00:00"),
    ]
    assert trail_end(list(reversed(trail))) == pytest.approx(1795687205.0)
    assert trail_end(trail[:3]) is None
    trail[2]["artifactUris"] = ["s3://b/artifacts/v/r/A/attempt=1/output.json"]
    assert trail_result(trail) == "s3://b/artifacts/v/r/A/attempt=1/output.json"


def rw(
    exec_id: str,
    stage: str,
    read: str,
    wrote: str,
    started: float,
    finished: float,
    outcome: str = "ok",
    attempt: int = 1,
) -> StageExecution:
    """An execution as an agent logs it: what it read and wrote, and no parent of its own."""
    return StageExecution(
        "r", stage, attempt, "c1", outcome, started, finished, exec_id=exec_id, read_uri=read, wrote_uri=wrote
    )


def b3_clean() -> list[StageExecution]:
    """A B3 run of W1: B's first attempt was slow (its retry committed first) and C's first crashed
    before its commit; every attempt read the output its orchestrator handed it."""
    return [
        rw("A:1", "A", "in", "A/1", 0, 1),
        rw("B:1", "B", "A/1", "B/1", 1, 5.1, attempt=1),  # slow: its output is written, never read
        rw("B:2", "B", "A/1", "B/2", 2.8, 3, attempt=2),
        rw("C:1", "C", "B/2", "", 3, 3.5, attempt=1),  # worked, crashed before the commit
        rw("C:2", "C", "B/2", "C/2", 5.2, 5.4, attempt=2),
    ]


def test_a_clean_b3_log_has_no_orphan_though_it_retried() -> None:
    verdict = judge(b3_clean(), W1, ended_at=5.5, result_uri="C/2")
    assert judge(b3_clean(), W1, ended_at=5.5) == verdict  # the same without the recorded result
    assert (verdict.unlinked, verdict.late, verdict.orphans_lineage) == (0, 0, 0)
    assert verdict.duplicates == 2 and verdict.terminal_completed  # a slow B and a crashed C ran again


def test_an_injected_b3_execution_with_an_unaccepted_parent_is_found() -> None:
    # C run again off the slow attempt's output, which the run never went on with.
    log = [*b3_clean(), rw("C:3", "C", "B/1", "C/3", 5.2, 5.3, attempt=3)]
    verdict = judge(log, W1, ended_at=5.5, result_uri="C/2")  # the trail's last committed output
    assert (verdict.unlinked, verdict.late) == (1, 0)
    # ... and so is one that read nothing the run wrote before its stage (C off the input).
    assert judge([*b3_clean(), rw("X", "C", "in", "", 5.2, 5.3)], W1, ended_at=5.5).unlinked == 1


def test_b1_prime_re_runs_on_the_trajectory_are_not_orphans() -> None:
    # B1': deterministic keys, deduplicated enqueue. B's consumer died before its ack; the
    # redelivery found B's output, and C was enqueued once.
    log = [
        rw("1.1", "A", "in", "r/A", 0, 1),
        rw("2.1", "B", "r/A", "r/B", 1, 2),
        rw("2.2", "B", "r/A", "r/B", 3.5, 3.6, attempt=2),
        rw("3.1", "C", "r/B", "r/C", 2, 3),
    ]
    verdict = judge(log, W1, ended_at=3.0)
    assert (verdict.unlinked, verdict.late, verdict.duplicates) == (0, 1, 1)  # late: after the end, linked


def test_b1_prime_orphans_only_what_really_re_ran_off_the_trajectory() -> None:
    log = [
        rw("1.1", "A", "in", "r/A", 0, 1),
        rw("2.1", "B", "r/A", "r/B", 1, 2),
        rw("3.1", "C", "r/B", "r/C", 2, 3),
        rw("4.1", "C", "r/A", "r/C2", 2.5, 3.5),  # C straight off A's output: B skipped
    ]
    assert (judge(log, W1, ended_at=3.0).unlinked, judge(log, W1, ended_at=3.0).late) == (1, 0)


def test_b1_s_random_keys_unlink_the_chain_a_redelivery_starts() -> None:
    # B1: a lost ack on B; the redelivered B wrote another artifact, and the C that read it ran
    # before the run's end: unlinked. The first chain's C ended the run.
    log = [
        rw("1.1", "A", "in", "r/A/x", 0, 1),
        rw("2.1", "B", "r/A/x", "r/B/y", 1, 2),
        rw("2.2", "B", "r/A/x", "r/B/z", 1.6, 2.2, attempt=2),
        rw("3.1", "C", "r/B/y", "r/C/u", 2, 3),
        rw("4.1", "C", "r/B/z", "r/C/v", 2.3, 3.4),
    ]
    verdict = judge(log, W1, ended_at=3.0)
    assert (verdict.unlinked, verdict.late, verdict.duplicates) == (1, 0, 2)
    [(met, seconds)] = verdict.retries  # both Bs read A's output: one message, delivered twice
    assert met == "ok" and seconds == pytest.approx(0.6)


def test_pairing_holds_when_every_key_drew_one_fault() -> None:
    report = compare(
        {
            "B3": [
                ("b3-1", "w3-1|A|1", ""),
                ("b3-1", "w3-1|B|1", "crash"),
                ("b3-1", "w3-1|B|2", ""),
                ("b3-1.replay-1", "w3-1|A|1", ""),
            ],
            "B1": [
                ("b1-1", "w3-1|A|1", ""),
                ("b1-1", "w3-1|B|1", "crash"),
                ("b1-1", "w3-1|B|2", ""),
                ("b1-1", "w3-1|B|2", ""),  # a duplicate chain meets B's second attempt again
                ("b1-1.replay-1", "w3-1|A|1", ""),  # a replay meets its original's draws
            ],
            "B2": [
                ("b2-1", "w3-1|A|1", ""),
                ("b2-1", "w3-1|B|1", "crash"),
                ("b2-1", "w3-1|C|1", "slow"),
                ("b2-1.replay-1", "w3-1|A|1", ""),
            ],
        }
    )
    assert report["shared"] == 2 and report["shared_faults"] == {"crash": 1, "none": 1}
    assert report["faults"]["B1"] == {"crash": 1, "none": 2} and report["faults"]["B2"] == {
        "crash": 1,
        "none": 1,
        "slow": 1,
    }
    assert report["reached"] == {"B3": 3, "B1": 3, "B2": 3}
    assert report["missed"] == {"B3": 1, "B1": 1, "B2": 1}  # C|1 for B3 and B1, B|2 for B2
    assert report["redrawn"] == {"B3": 0, "B1": 1, "B2": 0}


def test_a_key_that_drew_two_faults_breaks_the_pairing() -> None:
    with pytest.raises(PairingBroken, match=r"w3-1\|B\|1: B3 met crash, B1 met no fault"):
        compare({"B3": [("b3-1", "w3-1|B|1", "crash")], "B1": [("b1-1", "w3-1|B|1", "")]})
    with pytest.raises(PairingBroken, match=r"w3-1\|C\|1: B1 met crash, B1 met no fault"):
        compare({"B1": [("b1-1", "w3-1|C|1", "crash"), ("b1-1", "w3-1|C|1", "")]})


def test_the_check_fails_on_unpaired_logs() -> None:
    # Two modes that drew their faults with different seeds reached the same keys: unpaired.
    reached = [(item.input_id, stage) for item in inputs_for("W3", 30, 7) for stage in "ABD"]

    def logged(mode: str, seed: int) -> list[tuple[str, str, str]]:
        return [
            (f"{mode}-{input_id}", fault_key(input_id, stage, 1), draw(RATES["W3"], seed, input_id, stage, 1) or "")
            for input_id, stage in reached
        ]

    compare({"B3": logged("b3", 7), "B1": logged("b1", 7)})  # paired: the same seed
    with pytest.raises(PairingBroken, match="met"):
        compare({"B3": logged("b3", 7), "B1": logged("b1", 8)})


def test_a_missing_start_breaks_the_pairing() -> None:
    with pytest.raises(PairingBroken, match="did not all start the same inputs and replays"):
        compare(
            {
                "B3": [("b3-1", "w3-1|A|1", ""), ("b3-1.replay-1", "w3-1|A|1", "")],
                "B1": [("b1-1", "w3-1|A|1", "")],
            }
        )


def test_a_start_whose_first_attempt_died_before_it_logged_still_counts() -> None:
    # B3's worker was killed with A's first attempt of the replay in flight: its retry logged A|2.
    report = compare(
        {
            "B3": [("b3-1", "w3-1|A|1", ""), ("b3-1.replay-1", "w3-1|A|2", "")],
            "B1": [("b1-1", "w3-1|A|1", ""), ("b1-1.replay-1", "w3-1|A|1", "")],
        }
    )
    assert report["reached"] == {"B3": 2, "B1": 1} and report["missed"] == {"B3": 0, "B1": 1}
