"""The proof that the modes were paired, from what their agents drew.

Every agent logs, with each execution, the fault it drew and the key of the draw (input, replay,
stage, attempt). Paired modes meet the same fault wherever they reach the same key, so for one
workload: a key that drew two different faults, in one mode or across modes, breaks the pairing
and fails the benchmark, and so does a row whose key names another replay than its run, or a
mode that did not draw the first attempt of the first stage of every input and replay. The modes
do not reach the same keys (B2 visits other stages, a redelivered B1 message draws its next
attempt, a B3 attempt that finds committed output runs no agent), so the report also prints each
mode's faults over the keys it reached, and how many keys every mode reached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bench.agents import replay_index


class PairingBroken(RuntimeError):
    """The same draw gave different faults: the modes did not meet the same fault schedule."""


def compare(draws: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, Any]:
    """Check one workload's draws, mode -> [(run id, key, fault)]; raise `PairingBroken` when
    a key drew two faults, a row's key names another replay than its run, or the modes did not
    all draw the first attempt of the first stage for the same (input, replay)s.

    Returns:
        ``shared``: keys every mode reached; ``faults``: mode -> fault -> count over the keys
        it reached (one per key); ``shared_faults``: fault -> count over the shared keys.
    """
    seen: dict[str, tuple[str, str]] = {}
    reached: dict[str, dict[str, str]] = {}
    starts: dict[str, set[tuple[str, str]]] = {}
    for mode, rows in draws.items():
        keys = reached.setdefault(mode, {})
        for run_id, key, fault in rows:
            input_id, replay, stage, attempt = key.split("|")
            if int(replay) != replay_index(run_id):
                raise PairingBroken(f"draw {key}: logged by {run_id}, replay {replay_index(run_id)}")
            earlier = seen.setdefault(key, (mode, fault))
            if earlier[1] != fault:
                raise PairingBroken(
                    f"draw {key}: {earlier[0]} met {earlier[1] or 'no fault'}, {mode} met {fault or 'no fault'}"
                )
            keys[key] = fault
            if (stage, attempt) == ("A", "1"):
                starts.setdefault(mode, set()).add((input_id, replay))
    started = list(starts.values())
    if len(starts) != len(reached) or any(found != started[0] for found in started):
        counts = {mode: len(starts.get(mode, set())) for mode in reached}
        raise PairingBroken(f"the modes did not all start the same inputs and replays: {counts}")
    shared = set.intersection(*(set(keys) for keys in reached.values())) if reached else set()
    return {
        "shared": len(shared),
        "faults": {mode: dict(Counter(f or "none" for f in keys.values())) for mode, keys in reached.items()},
        "shared_faults": dict(Counter(seen[key][1] or "none" for key in shared)),
    }
