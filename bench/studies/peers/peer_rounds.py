"""W6's performance phases in rounds: who goes when, one figure from several rounds, and the verdict.

One pass over the contenders measures each at a different moment, and on this machine the
contenders' own figures move by as much between two passes as the gaps being measured (DBOS went
from 2,610 to 3,266 runs/min across three W6 runs). So W6 measures in rounds: every round gives
each contender a fresh runner and measures it alone, the order rotated from round to round so no
contender always goes first or last. A table figure is the median of the rounds; the acceptance
ratios are taken inside each round, DSMO against the best peer of that same round, so the
verdict says how often a target was met rather than resting on one pass.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The peers DSMO is judged against (raw Temporal is the floor it runs on, reported beside them).
PEERS = ("langgraph", "dbos")
# Raw Temporal with its stages and send as local activities, beside "temporal" (regular ones): the
# same shape as DSMO's default run, so what is left between the two is DSMO's own cost; it is
# judged against the peers as DSMO is.
TEMPORAL_LOCAL = "temporal-local"
CPU_ROLES = ("runner", "server", "s3")
# Counts over the rounds rather than a typical round.
SUMMED = frozenset({"runner_restarts"})
# Which round a figure came from: it names one round, so the combined figures leave it out.
ROUND = "round"


def turn_order(names: Sequence[str], number: int) -> tuple[str, ...]:
    """The contenders' order in round ``number`` (from 0): the list rotated by one each round."""
    if not names:
        return ()
    shift = number % len(names)
    return (*names[shift:], *names[:shift])


def combined(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One contender's rounds as one set of figures: each number the median of the rounds.

    Nested figures (CPU per role, the second reply shape) are combined the same way; a figure a
    round lacks is taken from the rounds that have it; counts in ``SUMMED`` add up.
    """
    if not rounds:
        raise ValueError("rounds: no round to combine")
    return {**_median_of(rounds), "rounds": len(rounds)}


def _median_of(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in dict.fromkeys(key for one in rounds for key in one if key != ROUND):
        values = [one[key] for one in rounds if key in one]
        if key in SUMMED:
            out[key] = sum(values)
        elif all(isinstance(value, Mapping) for value in values):
            out[key] = _median_of(values)
        elif all(isinstance(value, int | float) and not isinstance(value, bool) for value in values):
            out[key] = statistics.median(values)
        else:
            out[key] = values[0]
    return out


def cpu_total(figures: Mapping[str, Any]) -> float:
    """CPU ms per run of the runner, its server and the store (what the tables add up)."""
    cpu = figures.get("cpu_ms_per_run") or {}
    return float(sum(cpu.get(role, 0.0) for role in CPU_ROLES))


@dataclass(frozen=True)
class Ratio:
    """DSMO's figure over the best peer's in one round, and which peer that was."""

    value: float
    peer: str


@dataclass(frozen=True)
class RoundVerdict:
    """One round's acceptance ratios (None where DSMO or every peer is missing from it)."""

    number: int
    throughput: Ratio | None
    latency: Ratio | None
    cpu: Ratio | None


# The targets: throughput at least the fastest peer's, W1 p50 at most the fastest
# peer's, CPU per run at most 1.3x the leanest peer's.
TARGETS = {"throughput": ("≥", 1.0), "latency": ("≤", 1.0), "cpu": ("≤", 1.3)}


def meets(kind: str, ratio: Ratio | None) -> bool:
    """Whether ``ratio`` meets the target for ``kind`` (one of ``TARGETS``)."""
    if ratio is None:
        return False
    sense, bound = TARGETS[kind]
    return ratio.value >= bound if sense == "≥" else ratio.value <= bound


def verdicts(rounds: Mapping[str, Sequence[Mapping[str, Any]]], contender: str = "dsmo") -> list[RoundVerdict]:
    """Per round, ``contender`` against the best of ``PEERS`` measured in that same round.

    ``rounds``: contender name -> its figures, one entry per round it completed, each with its
    ``round`` number (a round a contender failed is missing, and pairs with nothing).
    """
    by_round = {
        name: {int(figures.get(ROUND, number + 1)): figures for number, figures in enumerate(entries)}
        for name, entries in rounds.items()
    }
    out = []
    for number, mine in sorted(by_round.get(contender, {}).items()):
        peers = {name: entries[number] for name, entries in by_round.items() if name in PEERS and number in entries}
        out.append(
            RoundVerdict(
                number=number,
                throughput=_best(mine, peers, lambda f: f["throughput_per_min"], highest=True),
                latency=_best(mine, peers, lambda f: f["p50"], highest=False),
                cpu=_best(mine, peers, cpu_total, highest=False),
            )
        )
    return out


def _best(
    mine: Mapping[str, Any],
    peers: Mapping[str, Mapping[str, Any]],
    figure: Callable[[Mapping[str, Any]], float],
    *,
    highest: bool,
) -> Ratio | None:
    if not peers:
        return None
    choose = max if highest else min
    peer = choose(peers, key=lambda name: figure(peers[name]))
    best = figure(peers[peer])
    return Ratio(figure(mine) / best, peer) if best else None
