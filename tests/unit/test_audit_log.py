from __future__ import annotations

import json

from dsmo.activities.audit_log import chain, chained, unchained, verify_lines
from dsmo.workflows.contracts.trail_io import TrailHead

EVENTS = [{"seq": i, "type": "STAGE_SUCCEEDED", "runId": "r", "data": {"n": i}} for i in range(1, 5)]


def test_intact_chain_verifies() -> None:
    assert verify_lines(chain(EVENTS), EVENTS).ok
    assert verify_lines(chain(EVENTS)).lines == 4


def test_any_change_is_found_at_its_line() -> None:
    lines = chain(EVENTS).decode().splitlines()
    edited = json.loads(lines[2])
    edited["data"]["n"] = 99
    lines[2] = json.dumps(edited)
    result = verify_lines(("\n".join(lines) + "\n").encode())
    assert not result.ok and result.problem is not None and result.problem.startswith("line 3")


def test_removed_or_reordered_lines_break_the_chain() -> None:
    lines = chain(EVENTS).decode().splitlines()
    assert not verify_lines(("\n".join(lines[:1] + lines[2:]) + "\n").encode()).ok
    assert not verify_lines(("\n".join([lines[1], lines[0], *lines[2:]]) + "\n").encode()).ok


def test_a_recomputed_chain_still_differs_from_the_run() -> None:
    forged = [dict(event) for event in EVENTS]
    forged[1]["data"] = {"n": -1}
    result = verify_lines(chain(forged), EVENTS)
    assert not result.ok and "differs from the run's own audit trail" in (result.problem or "")


def test_segments_chained_from_each_other_make_the_whole_trail() -> None:
    first, head = chained(EVENTS[:2])
    second, last = chained(EVENTS[2:], head)
    assert first + second == chain(EVENTS)
    assert last == json.loads(chain(EVENTS).splitlines()[-1])["hash"]
    assert unchained(first + second) == EVENTS


def test_a_consistent_rewrite_of_file_and_segments_is_caught_by_the_runs_head() -> None:
    _, head_hash = chained(EVENTS[:2])  # the segment a long run wrote; Temporal keeps its head
    head = TrailHead(seq=2, hash=head_hash, segments=1)
    forged = [{**EVENTS[0], "data": {"n": 99}}, *EVENTS[1:]]
    # Someone rewrote the segments and the exported file alike: the chain and the "run's trail"
    # read back from those segments agree, but the chain no longer passes through the head.
    assert verify_lines(chain(forged), forged).ok
    result = verify_lines(chain(forged), forged, head)
    assert not result.ok and "head in Temporal" in (result.problem or "")
    assert verify_lines(chain(EVENTS), EVENTS, head).ok
