"""The ids DSMO derives for forks, replays and what-ifs stay valid however long the chain."""

from __future__ import annotations

from dsmo.workflows.common.identifiers import derived_run_id, run_id_problem


def test_a_fork_of_a_fork_keeps_the_first_run_s_root() -> None:
    run_id = "order-7"
    for n in range(30):
        run_id = derived_run_id(run_id, ("fork", "replay", "whatif")[n % 3], f"{n:08x}")
        assert run_id_problem(run_id) is None, run_id
    assert run_id == f"order-7.whatif-{29:08x}"


def test_a_root_too_long_for_the_suffix_is_cut_and_never_ends_in_two_dots() -> None:
    long_root = "a" * 190 + "." + "b" * 9
    derived = derived_run_id(long_root, "fork", "0123abcd")
    assert len(derived) == 200 and derived.endswith(".fork-0123abcd")
    assert run_id_problem(derived) is None, derived
    assert run_id_problem(derived_run_id("a" * 185 + ".", "whatif", "0123abcd")) is None


def test_only_dsmo_s_own_suffixes_are_taken_off() -> None:
    assert derived_run_id("claim.fork-late", "fork", "00000001") == "claim.fork-late.fork-00000001"
    assert derived_run_id("x.fork-0000000a.fork-0000000b", "fork", "0000000c") == "x.fork-0000000c"
