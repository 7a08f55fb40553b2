"""Key locks' lines and shards: who gets a slot when, and where a key value's line lives."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from dsmo.workflows.definition.flow_control import KEY_SHARDS, QUIET_LIMIT, lock_id, shard_of
from dsmo.workflows.flow.key_lines import KeyLine
from dsmo.workflows.flow.slot_line import SlotLine

NOW = datetime(2026, 11, 26, tzinfo=UTC)
LATER = datetime(2026, 11, 26, 0, 1, tzinfo=UTC)


def test_a_free_slot_is_claimed_at_once_and_a_busy_one_lines_the_run_up() -> None:
    line = SlotLine(max_concurrent=1)
    admitted, changed = line.claim("r1", {"queue": True}, NOW)
    assert admitted.admitted and changed and line.holders == ["r1"]
    busy, changed = line.claim("r2", {"queue": True}, NOW)
    assert not busy.admitted and busy.holders == ["r1"] and busy.waiting == 0 and changed
    assert line.queue == ["r2"] and line.blocked
    # Asking again changes nothing: a holder is admitted, a run in line keeps its place.
    assert line.claim("r1", {}, NOW) == (admitted, False)
    assert line.claim("r2", {"queue": True}, NOW)[0].waiting == 0 and line.queue == ["r2"]  # none ahead of it


def test_a_start_that_does_not_queue_is_told_who_holds_the_key_and_left_out() -> None:
    line = SlotLine(max_concurrent=1, holders=["r1"])
    answer, changed = line.claim("r2", {"queue": False}, NOW)
    assert (answer.admitted, answer.holders, changed, line.queue) == (False, ["r1"], False, [])


def test_a_free_slot_goes_to_the_line_before_a_newcomer() -> None:
    line = SlotLine(max_concurrent=1, holders=["r1"], queue=["r2"])
    line.drop("r1")
    answer, _ = line.claim("r3", {"queue": True}, NOW)
    assert not answer.admitted and line.queue == ["r2", "r3"]
    assert line.next_holder() == "r2" and line.next_holder() is None and line.holders == ["r2"]


def test_runs_line_up_behind_their_priority_and_ahead_of_lower_ones() -> None:
    line = SlotLine(max_concurrent=1, holders=["busy"])
    for run_id, priority in [("low", 5), ("plain", None), ("urgent", 1), ("plain-2", 3), ("urgent-2", 1)]:
        line.line_up(run_id, priority)
    assert line.queue == ["urgent", "urgent-2", "plain", "plain-2", "low"]
    line.drop("busy")
    assert line.next_holder() == "urgent" and "urgent" not in line.priorities


def test_a_claim_says_how_many_wait_ahead_of_it_by_priority() -> None:
    line = SlotLine(max_concurrent=1, holders=["h"])
    waiting = [line.claim(run, {"queue": True, "priority": level}, NOW)[0].waiting for run, level in LINE]
    assert waiting == [0, 1, 0, 0] and line.queue == ["urgent", "usual", "low1", "low2"]
    # Without a place in line, the whole line is ahead.
    assert line.claim("look", {"queue": False}, NOW)[0].waiting == 4


LINE = [("low1", 5), ("low2", 5), ("usual", None), ("urgent", 1)]


def test_a_claim_that_replaces_the_line_goes_first_and_names_the_runs_it_replaces() -> None:
    line = SlotLine(max_concurrent=1, holders=["h"])
    for run, level in LINE:
        line.claim(run, {"queue": True, "priority": level}, NOW)
    answer, changed = line.claim("new", {"queue": True, "replaces": True, "priority": 5}, NOW)
    assert changed and (answer.holders, answer.waiting) == (["h"], 0)
    assert answer.queued == ["urgent", "usual", "low1", "low2"] and line.queue[0] == "new"
    assert line.next_holder() is None  # the holder is still there
    # Asked again (a retried update whose answer was lost): the same runs, none that came since.
    line.claim("late", {"queue": True}, LATER)
    again, changed = line.claim("new", {"queue": True, "replaces": True, "priority": 5}, LATER)
    assert not changed and again.queued == ["urgent", "usual", "low1", "low2"] and line.priorities["new"] == 5
    line.drop("h")
    assert line.next_holder() == "new"  # before any run it replaces, whichever cancel lands first
    # The answer leaves `queued` out when it names none: a starter from before it reads it as ever.
    assert "queued" not in line.claim("other", {"queue": True}, LATER)[0].model_dump()
    assert answer.model_dump()["queued"] == answer.queued


def test_a_line_with_a_limit_admits_that_many_at_once() -> None:
    line = SlotLine(max_concurrent=2)
    assert [line.claim(run_id, {"queue": True}, NOW)[0].admitted for run_id in ("a", "b", "c")] == [True, True, False]
    line.drop("a")
    assert line.next_holder() == "c" and line.next_holder() is None and not line.idle
    line.drop("b")
    line.drop("c")
    assert line.idle


def test_a_key_value_always_lands_on_the_same_shard_and_keys_spread_over_all() -> None:
    assert lock_id("chat", "c-1", "dsmo") == lock_id("chat", "c-1", "dsmo") != lock_id("chat", "c-2", "dsmo")
    shard, line = shard_of(lock_id("chat", "c-1", "dsmo"))
    assert shard.startswith("dsmo-keys.chat.dsmo.") and line is not None and len(line) == 24
    # Another task queue's workers run other locks: a lock never waits on a queue nobody polls.
    assert shard_of(lock_id("chat", "c-1", "other"))[1] == line != shard_of(lock_id("chat", "c-1", "other"))[0]
    shards = Counter(shard_of(lock_id("chat", f"c-{index}", "dsmo"))[0] for index in range(6_400))
    assert len(shards) == KEY_SHARDS and max(shards.values()) < 2 * 6_400 / KEY_SHARDS


def test_a_lock_from_before_sharding_is_a_workflow_of_its_own() -> None:
    assert shard_of("dsmo-slots.chat.0a1b2c") == ("dsmo-slots.chat.0a1b2c", None)
    assert shard_of("dsmo-limiter.chat") == ("dsmo-limiter.chat", None)


def test_holders_told_a_run_waits_are_wanted_until_they_leave() -> None:
    line = KeyLine(max_concurrent=2, holders=["a", "b"])
    assert line.full and line.unwanted() == ["a", "b"]
    line.wanted.append("a")
    assert line.unwanted() == ["b"]
    line.drop("a")
    assert line.wanted == [] and not line.full and line.unwanted() == ["b"]


def test_a_key_with_many_slots_has_no_holder_to_tell() -> None:
    # Its runs give their slots back as they end: nobody needs telling, nor checking.
    many = KeyLine(max_concurrent=QUIET_LIMIT + 1, holders=[f"r{n}" for n in range(QUIET_LIMIT + 1)])
    assert many.full and not many.quiet and many.unwanted() == []
