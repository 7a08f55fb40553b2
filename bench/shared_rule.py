"""One rule for every mode: a run's path, duplicates and orphans, computed from the execution log.

Every stage execution is logged by the agent that ran it (run, stage, attempt, consumer, outcome,
start and finish, its own id, the artifacts it read and wrote, and the fault it drew), whichever
mode it belongs to. The paper (section 2.5.3) defines:

- *orphan rate*: "the fraction of stage executions not linked to a valid trajectory";
- *duplicate processing*: "the fraction of duplicate stage completions";
- *SPS*: "the fraction of replays that follow the same sequence of states".

Here, for one run, with its input's valid trajectory T (the graph's path for the input's route)
and the moment the run ended as its system recorded it (B3: the trail's last event; B1 and B2:
the first chain that finished or was dead-lettered):

- a **completion** is an execution whose outcome is ``ok`` (the agent produced its output);
- **path** = the stages of the completions in the order they finished, a stage completed again
  right after itself counted once, cut after the first completion of the terminal stage: the
  collapsed path, kept as a second row beside the attempt sequence; **valid_path** = path == T;
- **attempts** = every execution the run's input caused, in the order they started, as
  ``stage:outcome``: the sequence of states the paper's SPS compares, retries, failures and
  executions after the end included (a queue's redelivery after its run ended is as much a
  state of that run as an orchestrator's retry before it ended);
- **terminal_completed** = a completion of the terminal stage (success also needs no dead letter:
  the caller knows those);
- **duplicates** = Σ over stages of (completions of the stage - 1): extra completions of a
  (run, stage), wherever they came from (a retry after a timeout, a redelivery, a second chain);
- **orphans** (the first rule) = executions of a stage not in T, plus executions that started
  after the run ended;
- **lineage, from data**: every execution logs the artifact it read (``read_uri``) and the one it
  wrote (``wrote_uri``, empty when it wrote none, as after a crash before the commit); its
  **parent** is the execution that wrote the artifact it read (the first to finish, when several
  wrote the same deterministic key); an artifact no execution of the run wrote is the run's input,
  so its reader's parent is the run's start. No mode's own bookkeeping (a queue message's sender,
  an orchestrator's schedule) is trusted: only what each execution read and wrote;
- the **accepted trajectory** is the lineage of the execution that ended the run: the writer of
  the artifact the run ended with, as its system recorded it (B3: its trail's last committed
  output; B1 and B2: the output of the chain that ended first), else the first completion of the
  terminal stage that wrote its output before the end, else the last completion before it;
- **unlinked** (the paper's "not linked to a valid trajectory") = executions whose chain of
  parents, back to the run's start, is not a prefix of T through accepted executions;
- **late** = executions that started after the run ended: reported beside ``unlinked``, not mixed
  into it (a queue run ends at its first chain's end, before a redelivery of its terminal stage
  comes back, which the duplicates already count);
- **orphans by lineage** = unlinked or late (both rules' union, kept for the earlier tables).

The same function judges B1, B2 and B3, so the three columns of Table 1 differ only in what the
systems did, not in how it was counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

OK = "ok"
ROOT = ""  # the parent of an execution the run's start enqueued


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
    exec_id: str = ""  # unique within its run
    parent: str = ROOT  # the execution that enqueued or scheduled this one
    fault: str = ""  # the fault its agent drew ("": none)
    fault_key: str = ""  # what that draw was keyed on: input|stage|attempt
    read_uri: str = ""  # the artifact it read
    wrote_uri: str = ""  # the artifact it wrote ("": none)


@dataclass(frozen=True)
class Judgement:
    """What the shared rule makes of one run's executions."""

    path: list[str]
    valid_path: bool  # the collapsed path is T (a diagnostic: success is the caller's, with its DLQ)
    end: float | None
    duplicates: int
    orphans: int
    executions: int
    orphans_lineage: int = 0
    unlinked: int = 0
    late: int = 0
    attempts: list[str] = field(default_factory=list)
    terminal_completed: bool = False
    # (what the earlier attempt met, seconds from its start to the next attempt's start)
    retries: list[tuple[str, float]] = field(default_factory=list)


def judge(
    executions: Sequence[StageExecution],
    trajectory: Sequence[str],
    *,
    ended_at: float | None = None,
    result_uri: str | None = None,
) -> Judgement:
    """Apply the rule (see the module's docstring) to one run's logged executions.

    Args:
        executions: The run's rows of the shared log.
        trajectory: The input's valid trajectory.
        ended_at: When the run ended, as its system recorded it (default: when the first
            completion of the terminal stage finished).
        result_uri: The artifact the run ended with, as its system recorded it (B3: the last
            committed output in its trail; the queue: the output of the chain that ended it);
            its writer ended the run. Default: the first completion of the terminal stage.
    """
    executions = link_by_artifacts(executions)
    terminal = trajectory[-1]
    completions = sorted((e for e in executions if e.outcome == OK), key=lambda e: (e.finished, e.started))
    path: list[str] = []
    first_end: float | None = None
    for completion in completions:
        if not path or path[-1] != completion.stage:
            path.append(completion.stage)
        if completion.stage == terminal:
            first_end = completion.finished
            break
    end = ended_at if ended_at is not None else first_end
    per_stage = Counter(e.stage for e in completions)
    on_trajectory = set(trajectory)
    late = [end is not None and e.started > end for e in executions]
    orphans = sum(e.stage not in on_trajectory or after for e, after in zip(executions, late, strict=True))
    by_id = {e.exec_id: e for e in executions if e.exec_id}
    ending = writer_of(executions, result_uri) if result_uri else None
    ending = ending or _ending(completions, terminal, end)
    accepted = {e.exec_id for e in lineage(ending, by_id)}
    unlinked = [not linked(e, by_id, trajectory, accepted) for e in executions]
    return Judgement(
        path=path,
        valid_path=path == list(trajectory),
        end=end,
        duplicates=sum(count - 1 for count in per_stage.values()),
        orphans=orphans,
        executions=len(executions),
        orphans_lineage=sum(a or b for a, b in zip(unlinked, late, strict=True)),
        unlinked=sum(unlinked),
        late=sum(late),
        attempts=[f"{e.stage}:{e.outcome}" for e in sorted(executions, key=lambda e: (e.started, e.finished))],
        terminal_completed=per_stage[terminal] > 0,
        retries=retry_gaps(executions),
    )


def link_by_artifacts(executions: Sequence[StageExecution]) -> list[StageExecution]:
    """The executions with their parents from what they read: the execution that wrote the
    artifact each read (the first to finish among its writers), or the run's start when none did.
    Executions that logged no read keep the parent they logged (hand-made logs of earlier tests)."""
    writers = _writers(executions)
    linked_rows = []
    for row in executions:
        writer = writers.get(row.read_uri) if row.read_uri else None
        linked_rows.append(replace(row, parent=ROOT if writer is None else writer.exec_id) if row.read_uri else row)
    return linked_rows


def _writers(executions: Sequence[StageExecution]) -> dict[str, StageExecution]:
    """artifact -> the first execution (by finish) that wrote it."""
    writers: dict[str, StageExecution] = {}
    for e in sorted(executions, key=lambda e: (e.finished, e.started)):
        if e.wrote_uri and e.exec_id:
            writers.setdefault(e.wrote_uri, e)
    return writers


def writer_of(executions: Sequence[StageExecution], uri: str) -> StageExecution | None:
    """The execution that wrote ``uri`` (the first to finish), if one of ``executions`` did."""
    return _writers(executions).get(uri)


def retry_gaps(executions: Sequence[StageExecution]) -> list[tuple[str, float]]:
    """How long each retry or redelivery took to start: for executions of one stage from one parent
    (the same message, or the same scheduling), in the order they started, what the earlier met
    (its drawn fault, else its outcome) and the seconds from its start to the next one's."""
    by_origin: dict[tuple[str, str], list[StageExecution]] = {}
    for e in executions:
        if e.exec_id:
            by_origin.setdefault((e.stage, e.parent), []).append(e)
    gaps = []
    for attempts in by_origin.values():
        ordered = sorted(attempts, key=lambda e: e.started)
        gaps += [(a.fault or a.outcome, b.started - a.started) for a, b in pairwise(ordered)]
    return gaps


def _ending(completions: list[StageExecution], terminal: str, end: float | None) -> StageExecution | None:
    """The completion that ended the run: the first of the terminal stage, else the last before
    the end (a chain an agent stopped early, or a run dead-lettered after it)."""
    before = [c for c in completions if end is None or c.finished <= end]
    wrote = [c for c in before if c.wrote_uri] if any(c.wrote_uri for c in completions) else before
    return next((c for c in wrote if c.stage == terminal), before[-1] if before else None)


def lineage(execution: StageExecution | None, by_id: dict[str, StageExecution]) -> list[StageExecution]:
    """``execution`` and its ancestors, from the run's start; [] when a link is missing."""
    chain: list[StageExecution] = []
    seen: set[str] = set()
    while execution is not None:
        if execution.exec_id in seen:  # a cycle: no lineage
            return []
        seen.add(execution.exec_id)
        chain.append(execution)
        if execution.parent == ROOT:
            return chain[::-1]
        execution = by_id.get(execution.parent)
    return []


def linked(
    execution: StageExecution,
    by_id: dict[str, StageExecution],
    trajectory: Sequence[str],
    accepted: Collection[str],
) -> bool:
    """Whether ``execution``'s lineage is a prefix of ``trajectory`` through accepted executions."""
    chain = lineage(execution, by_id) if execution.exec_id else []
    if not chain or [e.stage for e in chain] != list(trajectory[: len(chain)]):
        return False
    return all(ancestor.exec_id in accepted for ancestor in chain[:-1])
