"""The crash test's faults, drawn once from a seed, the same for every contender.

A run may be killed at one point of one stage: ``during`` (the stage has begun, its work is not
done) or ``after`` (the work is done and written, the engine has not recorded it). The agent
SIGKILLs its own process there, once per (run, stage): the ledger remembers that it did. A run
either gets a reply or is left to time out. Kills while runs wait and the server's restart are
the driver's, at fixed moments.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

STAGES = ("A", "B", "C", "send")
KILL_POINTS = ("during", "after")


@dataclass(frozen=True)
class Kill:
    """SIGKILL the runner at ``point`` of ``stage``."""

    stage: str
    point: str


@dataclass
class FaultPlan:
    """Per run: where its runner is killed (if anywhere), and whether it gets a reply."""

    kills: dict[str, Kill] = field(default_factory=dict)
    no_reply: set[str] = field(default_factory=set)

    @classmethod
    def draw(cls, run_ids: list[str], *, seed: int, kill_share: float, no_reply_share: float) -> FaultPlan:
        """Faults for ``run_ids``: a share killed at a random stage and point, a share never replied to."""
        rng = random.Random(seed)
        kills, no_reply = {}, set()
        for run_id in run_ids:
            if rng.random() < kill_share:
                kills[run_id] = Kill(rng.choice(STAGES), rng.choice(KILL_POINTS))
            if rng.random() < no_reply_share:
                no_reply.add(run_id)
        return cls(kills, no_reply)

    def kill_at(self, run_id: str, stage: str, point: str) -> bool:
        kill = self.kills.get(run_id)
        return kill is not None and kill.stage == stage and kill.point == point

    def renamed(self, prefix: str) -> FaultPlan:
        """The same faults for run ids that start with ``prefix`` (each contender names its own runs)."""
        return FaultPlan(
            {prefix + run_id: kill for run_id, kill in self.kills.items()}, {prefix + r for r in self.no_reply}
        )

    def save(self, path: Path) -> None:
        kills = {run_id: asdict(kill) for run_id, kill in self.kills.items()}
        path.write_text(json.dumps({"kills": kills, "no_reply": sorted(self.no_reply)}))

    @classmethod
    def load(cls, path: Path | None) -> FaultPlan:
        if path is None or not path.exists():
            return cls()
        data = json.loads(path.read_text())
        return cls({run_id: Kill(**kill) for run_id, kill in data["kills"].items()}, set(data["no_reply"]))
