"""Paired experiments: every mode gets the same inputs and meets the same faults.

An input is an id and a route (W2-W4 branch on it). A fault is drawn from a generator seeded by
(seed, input id, replay index, stage, attempt), never by a run id, so B1, B2 and B3 meet the same
fault on the same attempt of the same stage of the same input. The kinds mean the same in every
mode:

- ``transient``: the agent fails before working; retried (a redelivery, or Temporal's retry);
- ``permanent``: the agent refuses the input; never retried, the run is dead-lettered;
- ``slow``: the agent works past the stage timeout (1.5 s); another attempt is started;
- ``crash``: the agent works, enqueues what follows, then its process dies before the ack;
- ``lost_ack``: the agent works but its acknowledgement is lost.

In B3 a crash and a lost ack both mean the activity's completion never reaches Temporal (the
activity raises after doing its work), so Temporal retries it; on the queue they make the broker
redeliver the message. The report prints a checksum of the inputs and of the fault schedule per
mode: equal checksums are the proof that the modes were paired.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

FAULT_KINDS = ("permanent", "slow", "crash", "lost_ack", "transient")
MAX_ATTEMPTS = 3  # every mode: three attempts of a stage, then the dead-letter queue
SCHEDULE_ATTEMPTS = 6  # attempts per stage covered by the printed checksum


@dataclass(frozen=True)
class FaultRates:
    """How often each fault strikes an attempt of a stage in ``stages``."""

    permanent: float = 0.0
    slow: float = 0.0
    crash: float = 0.0
    lost_ack: float = 0.0
    transient: float = 0.0
    stages: frozenset[str] = frozenset({"B", "C"})

    def any(self) -> bool:
        return any(getattr(self, kind) for kind in FAULT_KINDS)


# W3 follows the paper's "random timeouts and transient failures in B and C"; the crash, lost-ack
# and permanent shares are ours (the paper gives no rates). W4 is "N runs in parallel with
# backpressure and retries": transient failures make the retries happen.
RATES = {
    "W1": FaultRates(),
    "W2": FaultRates(),
    "W3": FaultRates(permanent=0.02, slow=0.04, crash=0.03, lost_ack=0.03, transient=0.10),
    "W4": FaultRates(transient=0.05, stages=frozenset({"A", "B", "C"})),
}


def draw(rates: FaultRates, seed: int, input_id: str, replay: int, stage: str, attempt: int) -> str | None:
    """The fault of one attempt of one stage of one input's run (original: replay 0), if any."""
    if stage not in rates.stages:
        return None
    roll = random.Random(f"{seed}|{input_id}|{replay}|{stage}|{attempt}").random()
    bound = 0.0
    for kind in FAULT_KINDS:
        bound += getattr(rates, kind)
        if roll < bound:
            return kind
    return None


def ambiguous(seed: int, input_id: str, replay: int, stage: str, attempt: int, share: float) -> float | None:
    """B2's routing draw: a number in [0, 1) when the agent's choice is ambiguous, else None."""
    rng = random.Random(f"{seed}|route|{input_id}|{replay}|{stage}|{attempt}")
    return rng.random() if rng.random() < share else None


# The workloads' graphs (stage -> the stages that may follow; [] = terminal), as B3's definitions.
GRAPHS: dict[str, dict[str, list[str]]] = {
    "linear": {"A": ["B"], "B": ["C"], "C": []},
    "branch": {"A": ["B", "C"], "B": ["D"], "C": ["D"], "D": []},
}


def graph_of(workload: str) -> dict[str, list[str]]:
    """W1 and W4 are A -> B -> C; W2 and W3 are A -> (B or C) -> D."""
    return GRAPHS["linear" if workload in ("W1", "W4") else "branch"]


def valid_next(workload: str, stage: str, route: str) -> str | None:
    """The stage that follows ``stage`` for an input with ``route`` (None after the last)."""
    options = graph_of(workload)[stage]
    if not options:
        return None
    return options[0] if len(options) == 1 else ("B" if route == "b" else "C")


def trajectory(workload: str, route: str) -> list[str]:
    """The valid trajectory of an input: the graph's path for its route."""
    path, stage = ["A"], valid_next(workload, "A", route)
    while stage is not None:
        path.append(stage)
        stage = valid_next(workload, stage, route)
    return path


@dataclass(frozen=True)
class Input:
    """One input of a workload: the same in every mode."""

    input_id: str
    route: str


def inputs_for(workload: str, count: int, seed: int) -> list[Input]:
    """The workload's inputs, from its own seeded generator (not from the order modes run in)."""
    rng = random.Random(f"{seed}|inputs|{workload}")
    return [Input(f"{workload.lower()}-{index:04d}", "b" if rng.random() < 0.5 else "c") for index in range(count)]


def inputs_checksum(inputs: Sequence[Input]) -> str:
    """A short digest of the inputs a mode was given."""
    text = "\n".join(f"{item.input_id}:{item.route}" for item in inputs)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def faults_checksum(rates: FaultRates, seed: int, inputs: Sequence[Input], replays: int, stages: Sequence[str]) -> str:
    """A short digest of the fault schedule a mode met: every draw for its inputs and replays."""
    lines = [
        f"{item.input_id}|{replay}|{stage}|{attempt}|{draw(rates, seed, item.input_id, replay, stage, attempt)}"
        for item in inputs
        for replay in range(replays + 1)
        for stage in stages
        for attempt in range(1, SCHEDULE_ATTEMPTS + 1)
    ]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]
