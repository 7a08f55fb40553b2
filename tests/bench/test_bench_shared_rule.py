"""The paired harness's pure parts: the shared rule on hand-built logs, pairing, intervals."""

from __future__ import annotations

import math

from bench.confidence import bootstrap
from bench.paired import (
    NO_FAULTS,
    RATES,
    FaultRates,
    alternatives,
    deviation,
    draw,
    expected_dlq,
    fault_key,
    inputs_checksum,
    inputs_for,
    stage_dead_letter_chance,
    trajectory,
)
from bench.shared_rule import StageExecution, judge

W1 = ["A", "B", "C"]


def run(*rows: tuple[str, str, float, float], attempt: int = 1) -> list[StageExecution]:
    """Executions of run r: (stage, outcome, started, finished)."""
    return [StageExecution("r", stage, attempt, "c1", outcome, start, end) for stage, outcome, start, end in rows]


def test_a_clean_run_has_its_path_and_nothing_else() -> None:
    verdict = judge(run(("A", "ok", 0, 1), ("B", "ok", 1, 2), ("C", "ok", 2, 3)), W1)
    assert (verdict.path, verdict.valid_path, verdict.end, verdict.duplicates, verdict.orphans) == (W1, True, 3, 0, 0)


def test_a_retry_after_a_timeout_is_a_duplicate_not_an_orphan() -> None:
    # B's first attempt ran past its timeout and completed late, after the retry's completion.
    log = run(("A", "ok", 0, 1), ("B", "ok", 1, 3.6), ("B", "ok", 2.7, 3), ("C", "ok", 3, 4))
    verdict = judge(log, W1)
    assert verdict.path == W1 and verdict.valid_path
    assert (verdict.duplicates, verdict.orphans) == (1, 0)


def test_a_redelivered_chain_after_the_end_is_duplicated_and_orphaned() -> None:
    # A lost ack on B: B runs twice, each enqueues C; the second C starts after the run ended.
    log = run(
        ("A", "ok", 0, 1),
        ("B", "ok", 1, 2),
        ("C", "ok", 2, 3),
        ("B", "ok", 3.5, 4),
        ("C", "ok", 4, 5),
    )
    verdict = judge(log, W1)
    assert verdict.valid_path and verdict.end == 3
    assert (verdict.duplicates, verdict.orphans) == (2, 2)


def test_a_stage_off_the_trajectory_is_an_orphan_and_the_run_fails() -> None:
    # W2 with route b: A -> B -> D; an ambiguous router sent the run to C.
    verdict = judge(run(("A", "ok", 0, 1), ("C", "ok", 1, 2), ("D", "ok", 2, 3)), ["A", "B", "D"])
    assert verdict.path == ["A", "C", "D"] and not verdict.valid_path
    assert (verdict.duplicates, verdict.orphans) == (0, 1)


def test_a_loop_back_is_a_different_path_and_its_repeats_are_duplicates() -> None:
    # An ambiguous router sent the run back from B to A once.
    log = run(("A", "ok", 0, 1), ("B", "ok", 1, 2), ("A", "ok", 2, 3), ("B", "ok", 3, 4), ("C", "ok", 4, 5))
    verdict = judge(log, W1)
    assert verdict.path == ["A", "B", "A", "B", "C"] and not verdict.valid_path
    assert (verdict.duplicates, verdict.orphans) == (2, 0)


def test_failed_attempts_are_executions_but_not_completions() -> None:
    log = run(("A", "ok", 0, 1), ("B", "transient", 1, 1.1), ("B", "ok", 1.3, 2), ("C", "permanent", 2, 2.1))
    verdict = judge(log, W1)
    assert verdict.path == ["A", "B"] and not verdict.valid_path and verdict.end is None
    assert (verdict.duplicates, verdict.orphans, verdict.executions) == (0, 0, 4)


def test_the_same_inputs_and_faults_for_every_mode() -> None:
    first, again = inputs_for("W3", 30, seed=7), inputs_for("W3", 30, seed=7)
    assert first == again and inputs_checksum(first) == inputs_checksum(again)
    assert {item.route for item in first} == {"b", "c"}
    rates = RATES["W3"]
    # A fault depends on the seed, the input, the replay, the stage and the attempt, nothing else.
    drawn = [draw(rates, 7, item.input_id, "B", 1) for item in first]
    assert drawn == [draw(rates, 7, item.input_id, "B", 1) for item in again]
    assert drawn != [draw(rates, 8, item.input_id, "B", 1) for item in first]
    assert fault_key("w3-0001", "B", 3) == "w3-0001|B|3"


def test_each_kind_strikes_only_its_stages() -> None:
    w3 = [draw(RATES["W3"], 1, f"i{n}", "A", 1) for n in range(3000)]
    assert set(w3) == {None, "permanent"}  # W3's A meets only the permanent failures every stage can
    terminal = [draw(RATES["W3"], 1, f"i{n}", "D", 1) for n in range(3000)]
    assert {"slow", "crash", "lost_ack", "permanent"} <= set(terminal) and "transient" not in terminal
    w4_terminal = {draw(RATES["W4"], 1, f"i{n}", "C", 1) for n in range(3000)}
    assert {"slow", "crash", "lost_ack", "transient", "permanent"} <= w4_terminal
    assert {draw(RATES["W4"], 1, f"i{n}", "B", 1) for n in range(3000)} == {None, "permanent", "transient"}
    assert {draw(NO_FAULTS, 1, f"i{n}", "B", 1) for n in range(300)} == {None}


def test_the_rates_imply_the_paper_s_dead_letters_per_run() -> None:
    # B3's DLQ per run (0.12 in the paper), pooled over the full bench's runs per workload.
    runs = {"W1": 120, "W2": 120, "W3": 120, "W4": 400}
    implied = {w: sum(expected_dlq(RATES[w], trajectory(w, r)) for r in "bc") / 2 for w in runs}
    pooled = sum(implied[w] * runs[w] for w in runs) / sum(runs.values())
    assert 0.11 < pooled < 0.13
    assert stage_dead_letter_chance(FaultRates(permanent=0.1), "B") == 0.1
    # three retried failures in a row: 0.5 ** 3
    assert stage_dead_letter_chance(FaultRates(transient=0.5, stages=frozenset("B")), "B") == 0.125


def test_b2_picks_only_real_alternatives_and_decides_anew_at_each_hop() -> None:
    assert alternatives("W1", "A", "b") == ["C", None]  # skip B, or stop early
    assert alternatives("W1", "B", "b") == [None]
    assert alternatives("W1", "C", "b") == []  # the terminal stage decides nothing
    assert alternatives("W2", "A", "b") == ["C", "D", None]  # the other branch, skip, stop
    assert alternatives("W2", "A", "c") == ["B", "D", None]
    # 15% of runs deviate at one of their two decisions: 1 - 0.85 ** 0.5 per decision.
    hits = [deviation(7, f"i{n}", 0, "A", 0, 0.15, 2) is not None for n in range(4000)]
    assert abs(sum(hits) / 4000 - (1 - 0.85**0.5)) < 0.015
    # the same stage at another hop draws again; at the same hop, the same
    assert any(
        (deviation(7, f"i{n}", 0, "A", 0, 0.5, 1) is None) != (deviation(7, f"i{n}", 0, "A", 2, 0.5, 1) is None)
        for n in range(50)
    )
    assert deviation(7, "i1", 1, "A", 0, 0.5, 1) == deviation(7, "i1", 1, "A", 0, 0.5, 1)


def test_fault_shares_follow_their_rates() -> None:
    rates = FaultRates(permanent=0.1, transient=0.3)
    drawn = [draw(rates, 1, f"i{n}", "B", 1) for n in range(4000)]
    assert abs(drawn.count("permanent") / 4000 - 0.1) < 0.02
    assert abs(drawn.count("transient") / 4000 - 0.3) < 0.03
    assert drawn.count("slow") == 0


def test_the_bootstrap_interval_brackets_the_estimate_and_narrows_with_more_runs() -> None:
    def share(items: list[int]) -> float:
        return sum(items) / len(items)

    few = [[1], [0], [1], [1], [0]] * 4
    many = few * 10
    low, high = bootstrap([few], share)
    assert low <= share([x for g in few for x in g]) <= high
    low_many, high_many = bootstrap([many], share)
    assert high_many - low_many < high - low
    assert all(math.isnan(value) for value in bootstrap([], share))


def test_the_bootstrap_keeps_each_stratum_s_share() -> None:
    def share(items: list[int]) -> float:
        return sum(items) / len(items)

    # Two workloads: every run of one succeeds, none of the other. Resampled within each, every
    # resample holds ten of each: the share is exactly one half; pooled, it would wander.
    ones, zeros = [[1]] * 10, [[0]] * 10
    assert bootstrap([ones, zeros], share) == (0.5, 0.5)
    low, high = bootstrap([ones + zeros], share)
    assert low < 0.5 < high
