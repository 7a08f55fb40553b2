"""95% confidence intervals by the bootstrap, resampling inputs (an original with its replays)
within each workload.

A replay metric (SPS, RSR) pairs each replay with its original, so what is resampled is the
input's whole group; per-run metrics are resampled the same way, so every interval in Table 1
comes from the same resamples.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
RESAMPLES = 1000


def bootstrap(
    strata: Sequence[Sequence[Sequence[Item]]],
    statistic: Callable[[list[Item]], float],
    *,
    resamples: int = RESAMPLES,
    seed: int = 11,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile interval of ``statistic`` over groups drawn with replacement within strata.

    Args:
        strata: The groups of each stratum (a workload), each group the unit of resampling (one
            input's runs); a resample draws as many groups from each stratum as it holds, so
            every resample keeps the workloads' shares.
        statistic: The metric, over the flattened runs of one resample.
        resamples: How many resamples.
        seed: The generator's seed (the report is reproducible).
        level: The interval's coverage.

    Returns:
        (low, high); (nan, nan) when no resample gives a number.
    """
    strata = [groups for groups in strata if groups]
    if not strata:
        return math.nan, math.nan
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        drawn = [item for groups in strata for _ in groups for item in groups[rng.randrange(len(groups))]]
        value = statistic(drawn)
        if not math.isnan(value):
            values.append(value)
    if not values:
        return math.nan, math.nan
    values.sort()
    tail = (1 - level) / 2
    low = values[max(0, math.floor(tail * len(values)))]
    high = values[min(len(values) - 1, math.ceil((1 - tail) * len(values)) - 1)]
    return low, high
