"""The proof that the modes were paired, from what their agents drew, and a check that can fail.

Every agent logs, with each execution, the fault it drew and the key of the draw (input, stage,
attempt: a replay meets its original's draws). Paired modes meet the same fault wherever they
reach the same key. For one workload, the check fails (`PairingBroken`) when:

- a key met two different faults, in one mode (a duplicate chain or a redelivery meeting its key
  again) or across modes (a key another mode reached too): the modes did not share one fault
  schedule, as happens when they were given different seeds or keyed their draws differently;
- the modes did not all draw the first stage for the same (input, replay)s (at any attempt: an
  attempt killed with B3's worker process before it logged leaves no row, and its retry draws
  the next attempt's key).

The modes do not reach the same keys (B2 visits other stages, a redelivered B1 message draws its
next attempt, a B3 attempt that finds committed output runs no agent), so the report also says,
per mode, the keys it reached, those another mode reached and it did not, and how many of its
draws met a key its run had met before; and how many keys every mode reached, with their faults.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bench.agents import replay_index


class PairingBroken(RuntimeError):
    """The same draw gave different faults: the modes did not meet the same fault schedule."""


def compare(draws: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, Any]:
    """Check one workload's draws, mode -> [(run id, key, fault)] (see the module's docstring).

    Raises:
        PairingBroken: a key met two faults, or the modes did not start the same runs.

    Returns:
        ``shared``: keys every mode reached; ``shared_faults``: fault -> count over them;
        ``faults``: mode -> fault -> count over the keys it reached (one per key);
        ``reached``, ``missed``, ``redrawn``: mode -> the keys it reached, the keys another mode
        reached and it did not, and its draws of a key the same run had drawn before.
    """
    seen: dict[str, tuple[str, str]] = {}
    reached: dict[str, dict[str, str]] = {}
    redrawn: dict[str, int] = {}
    runs_seen: set[tuple[str, str, str]] = set()
    starts: dict[str, set[tuple[str, int]]] = {}
    for mode, rows in draws.items():
        keys = reached.setdefault(mode, {})
        redrawn[mode] = 0
        for run_id, key, fault in rows:
            input_id, stage, _attempt = key.split("|")
            earlier = seen.setdefault(key, (mode, fault))
            if earlier[1] != fault:
                raise PairingBroken(
                    f"draw {key}: {earlier[0]} met {earlier[1] or 'no fault'}, {mode} met {fault or 'no fault'}"
                )
            redrawn[mode] += (mode, run_id, key) in runs_seen  # met again in the same run
            runs_seen.add((mode, run_id, key))
            keys[key] = fault
            if stage == "A":
                starts.setdefault(mode, set()).add((input_id, replay_index(run_id)))
    started = list(starts.values())
    if len(starts) != len(reached) or any(found != started[0] for found in started):
        counts = {mode: len(starts.get(mode, set())) for mode in reached}
        raise PairingBroken(f"the modes did not all start the same inputs and replays: {counts}")
    every = set(seen)
    shared = set.intersection(*(set(keys) for keys in reached.values())) if reached else set()
    return {
        "shared": len(shared),
        "faults": {mode: dict(Counter(f or "none" for f in keys.values())) for mode, keys in reached.items()},
        "shared_faults": dict(Counter(seen[key][1] or "none" for key in shared)),
        "reached": {mode: len(keys) for mode, keys in reached.items()},
        "missed": {mode: len(every - set(keys)) for mode, keys in reached.items()},
        "redrawn": redrawn,
    }
