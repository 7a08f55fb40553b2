"""Paired experiments: every mode gets the same inputs and meets the same faults.

An input is an id and a route (W2-W4 branch on it). A fault is drawn from a generator seeded by
(seed, input id, stage, attempt), never by a run id nor a replay index, so every mode meets the
same fault on the same attempt of the same stage of the same input, and a replay meets its
original's. The kinds mean the same in every
mode:

- ``transient``: the agent fails before working; retried (a redelivery, or Temporal's retry);
- ``permanent``: the agent refuses the input; never retried, the run is dead-lettered;
- ``slow``: the agent works past the stage timeout (1.5 s); another attempt is started;
- ``crash``: the agent works, enqueues what follows, then its process dies before the ack;
- ``lost_ack``: the agent works but its acknowledgement is lost.

In B3 a crash means the activity's worker dies after the work and before the commit: its
completion never arrives, Temporal's start-to-close timeout (1.5 s, as the queue's visibility
timeout) starts another attempt, and the agent runs again; a lost ack is a completion lost after
the commit: the next attempt finds the committed output and reports it without running the
agent. On the queue both make the broker redeliver the message, and the agent runs again.

Every agent logs the fault it drew and the key of the draw (`fault_key`); the report compares
the draws of the modes (`bench.pairing`): the same key must have drawn the same fault in every
mode, which proves the modes were paired.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

FAULT_KINDS = ("permanent", "slow", "crash", "lost_ack", "transient")
POST_WORK = frozenset({"slow", "crash", "lost_ack"})  # the kinds that strike after the agent worked
MAX_ATTEMPTS = 3  # every mode: three attempts of a stage, then the dead-letter queue
EVERY_STAGE = frozenset("ABCD")


@dataclass(frozen=True)
class FaultRates:
    """How often each fault strikes an attempt of a stage, and which stages each kind can strike.

    A permanent failure can strike any stage; a transient one (before the work) the stages in
    ``stages``; the post-work kinds (slow, crash, lost_ack) those in ``post_work_stages``, the
    terminal stage included, where a duplicate or an orphan would outlive the run's end.
    """

    permanent: float = 0.0
    slow: float = 0.0
    crash: float = 0.0
    lost_ack: float = 0.0
    transient: float = 0.0
    stages: frozenset[str] = frozenset({"B", "C"})
    post_work_stages: frozenset[str] = frozenset({"B", "C"})
    permanent_stages: frozenset[str] = EVERY_STAGE

    def strikes(self, kind: str, stage: str) -> bool:
        """Whether ``kind`` can strike ``stage``."""
        if kind == "permanent":
            return stage in self.permanent_stages
        return stage in (self.post_work_stages if kind in POST_WORK else self.stages)


# Run-ending failures are calibrated to the paper's DLQ per run (0.11-0.17; B3 0.12, whose base
# success is 0.88 = 1 - its DLQ): a permanent failure strikes 3.8% of the attempts of every stage
# in every workload (a run of three stages ends in the dead letters about 11% of the time), and
# W3's and W4's retried faults add the rest when three attempts in a row fail (expected_dlq).
# W3 follows the paper's "random timeouts and transient failures in B and C", with the
# post-work faults (slow, crash, lost ack) on D, its terminal stage, too; W4 is "N runs in
# parallel with backpressure and retries": transient failures make the retries happen, and the
# post-work faults strike C, its terminal stage. The paper gives no rates: these are ours.
PERMANENT = 0.038
RATES = {
    "W1": FaultRates(permanent=PERMANENT),
    "W2": FaultRates(permanent=PERMANENT),
    "W3": FaultRates(
        permanent=PERMANENT,
        slow=0.04,
        crash=0.03,
        lost_ack=0.03,
        transient=0.10,
        post_work_stages=frozenset({"B", "C", "D"}),
    ),
    "W4": FaultRates(
        permanent=PERMANENT,
        slow=0.02,
        crash=0.03,
        lost_ack=0.03,
        transient=0.05,
        stages=frozenset({"A", "B", "C"}),
        post_work_stages=frozenset({"C"}),
    ),
}
NO_FAULTS = FaultRates()  # runs that are not Table 1's (the floor, flow control, subjects)


def fault_key(input_id: str, stage: str, attempt: int) -> str:
    """What a fault draw is keyed on, as every agent logs it beside the fault it drew. No replay
    index: a replay meets its original's faults, so SPS measures the system, not two draws."""
    return f"{input_id}|{stage}|{attempt}"


def draw(rates: FaultRates, seed: int, input_id: str, stage: str, attempt: int) -> str | None:
    """The fault of one attempt of one stage of one input's runs (its original and replays), if any."""
    roll = random.Random(f"{seed}|{fault_key(input_id, stage, attempt)}").random()
    bound = 0.0
    for kind in FAULT_KINDS:
        if not rates.strikes(kind, stage):
            continue
        bound += getattr(rates, kind)
        if roll < bound:
            return kind
    return None


def stage_dead_letter_chance(rates: FaultRates, stage: str) -> float:
    """The chance a stage ends in the dead letters: a permanent failure on any of its attempts,
    or every attempt failing with a retried fault (a lost ack after the commit is one only on the
    last attempt, and is counted as one on all: an upper bound)."""
    permanent = rates.permanent if rates.strikes("permanent", stage) else 0.0
    retried = float(
        sum(getattr(rates, kind) for kind in FAULT_KINDS if kind != "permanent" and rates.strikes(kind, stage))
    )
    return permanent * sum(retried**k for k in range(MAX_ATTEMPTS)) + retried**MAX_ATTEMPTS


def expected_dlq(rates: FaultRates, path: Sequence[str]) -> float:
    """The chance a run along ``path`` ends in the dead letters (B3: at most one per run)."""
    alive = 1.0
    for stage in path:
        alive *= 1 - stage_dead_letter_chance(rates, stage)
    return 1 - alive


def alternatives(workload: str, stage: str, route: str) -> list[str | None]:
    """B2's real alternatives to the correct next stage: the other branch, skipping the next
    stage, or stopping early (None); none at the terminal stage, where nothing is decided."""
    correct = valid_next(workload, stage, route)
    if correct is None:
        return []
    options: list[str | None] = [other for other in graph_of(workload)[stage] if other != correct]
    after = valid_next(workload, correct, route)
    if after is not None:
        options.append(after)
    options.append(None)
    return options


def deviation(
    seed: int, input_id: str, replay: int, stage: str, hop: int, share: float, decisions: int
) -> float | None:
    """B2's routing draw at one decision: a number in [0, 1) when its agent picks an alternative.

    ``share`` is the share of runs in which the agent decides differently at least once over its
    ``decisions`` (a run's routing decisions), so each decision deviates with
    1 - (1 - share) ** (1 / decisions). Keyed on the hop, so a stage visited again decides anew.
    """
    rng = random.Random(f"{seed}|route|{input_id}|{replay}|{stage}|{hop}")
    chance = 1 - (1 - share) ** (1 / max(1, decisions))
    return rng.random() if rng.random() < chance else None


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
