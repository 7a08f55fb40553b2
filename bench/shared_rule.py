"""One rule for every mode: a run's path, duplicates and orphans, computed from the execution log.

Every stage execution is logged by the agent that ran it (run, stage, attempt, consumer, outcome,
start and finish), whichever mode it belongs to. The paper (section 2.5.3) defines:

- *orphan rate*: "the fraction of stage executions not linked to a valid trajectory";
- *duplicate processing*: "the fraction of duplicate stage completions".

Here, for one run, with its input's valid trajectory T (the graph's path for the input's route):

- a **completion** is an execution whose outcome is ``ok`` (the agent produced its output);
- **path** = the stages of the completions in the order they finished, a stage completed again
  right after itself counted once (a retry or a redelivery is the same state, a loop back is not),
  cut after the first completion of the terminal stage;
- **end** = when that first terminal completion finished (none: the run never ended well);
- **success** = path == T;
- **duplicates** = Σ over stages of (completions of the stage - 1): extra completions of a
  (run, stage), wherever they came from (a retry after a timeout, a redelivery, a second chain);
- **orphans** = executions of a stage not in T, plus executions that started after the end.

The same function judges B1, B2 and B3, so the three columns of Table 1 differ only in what the
systems did, not in how it was counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

OK = "ok"


@dataclass(frozen=True)
class StageExecution:
    """One row of the shared execution log."""

    run_id: str
    stage: str
    attempt: int
    consumer: str
    outcome: str  # ok | transient | permanent
    started: float
    finished: float


@dataclass(frozen=True)
class Judgement:
    """What the shared rule makes of one run's executions."""

    path: list[str]
    success: bool
    end: float | None
    duplicates: int
    orphans: int
    executions: int


def judge(executions: Sequence[StageExecution], trajectory: Sequence[str]) -> Judgement:
    """Apply the rule (see the module's docstring) to one run's logged executions."""
    terminal = trajectory[-1]
    completions = sorted((e for e in executions if e.outcome == OK), key=lambda e: (e.finished, e.started))
    path: list[str] = []
    end: float | None = None
    for completion in completions:
        if not path or path[-1] != completion.stage:
            path.append(completion.stage)
        if completion.stage == terminal:
            end = completion.finished
            break
    per_stage = Counter(e.stage for e in completions)
    on_trajectory = set(trajectory)
    orphans = sum(e.stage not in on_trajectory or (end is not None and e.started > end) for e in executions)
    return Judgement(
        path=path,
        success=path == list(trajectory),
        end=end,
        duplicates=sum(count - 1 for count in per_stage.values()),
        orphans=orphans,
        executions=len(executions),
    )
