"""The proof that the modes were paired, from what their agents drew.

Every agent logs, with each execution, the fault it drew and the key of the draw (input, replay,
stage, attempt). Paired modes meet the same fault wherever they reach the same key, so for one
workload: a key that drew two different faults, in one mode or across modes, breaks the pairing
and fails the benchmark. The modes do not reach the same keys (B2 visits other stages, a
redelivered B1 message draws its next attempt, a B3 attempt that finds committed output runs no
agent), so the report also prints each mode's faults over the keys it reached, and how many
keys every mode reached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any


class PairingBroken(RuntimeError):
    """The same draw gave different faults: the modes did not meet the same fault schedule."""


def compare(draws: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, Any]:
    """Check one workload's draws, mode -> [(key, fault)]; raise `PairingBroken` on a conflict.

    Returns:
        ``shared``: keys every mode reached; ``faults``: mode -> fault -> count over the keys
        it reached (one per key); ``shared_faults``: fault -> count over the shared keys.
    """
    seen: dict[str, tuple[str, str]] = {}
    reached: dict[str, dict[str, str]] = {}
    for mode, rows in draws.items():
        keys = reached.setdefault(mode, {})
        for key, fault in rows:
            earlier = seen.setdefault(key, (mode, fault))
            if earlier[1] != fault:
                raise PairingBroken(
                    f"draw {key}: {earlier[0]} met {earlier[1] or 'no fault'}, {mode} met {fault or 'no fault'}"
                )
            keys[key] = fault
    shared = set.intersection(*(set(keys) for keys in reached.values())) if reached else set()
    return {
        "shared": len(shared),
        "faults": {mode: dict(Counter(f or "none" for f in keys.values())) for mode, keys in reached.items()},
        "shared_faults": dict(Counter(seen[key][1] or "none" for key in shared)),
    }
