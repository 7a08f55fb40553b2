"""What a candidate version would have done with recorded runs: replay a corpus against it.

Each selected ended run is replayed as a new linked run that follows the candidate definition
instead of its own: each of its waits takes the original's next recorded event of its kind
(whatever the wait's node is called there), `llm` stages answer from the recorded model
responses (no model is called unless ``rerun_llm``), and nothing is sent to anyone. A stage
whose node runs the same agent (name and version) in both versions reuses the original's
committed output of the same visit (a loop's second visit its second output); a changed or new
one runs. The report says, per run, whether the path is the same, and where it first diverges.
A replay the record cannot answer (a wait it never waited, a model call it never made) is an
error of the batch, never a divergence: nothing is invented. Replays found by the filter
(what-if ones included) are skipped: only recorded runs of their own are a corpus.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from dsmo.activities.artifacts import ArtifactStore
from dsmo.client import replay
from dsmo.client.batches import BatchReport, RunOutcome, run_batch
from dsmo.client.core import ClientCore
from dsmo.client.record_lines import stage_visits
from dsmo.client.replay_runs import run_replay
from dsmo.client.run_selection import Scope
from dsmo.workflows.common.identifiers import derived_run_id
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.node_types import LlmNode, RunAgentNode

# The fields of an `llm` node that make up what the model is asked (besides its tools).
QUESTION_FIELDS = frozenset(
    {"prompt", "system", "model", "temperature", "max_tokens", "output_schema", "input", "allowed_tools"}
)
# How a replay says its record has no event for a wait it reached (`Run.recorded_resume`).
WAIT_RAN_OUT = "the original run never resumed"

# How a replay's failure says the record could not answer it (not that the candidate failed).
RECORD_LIMITS = replay.RECORD_LIMITS


@dataclass(frozen=True)
class WhatIfRun:
    """One recorded run replayed against the candidate.

    Attributes:
        run_id: The recorded run.
        replay_id: Its replay on the candidate.
        same_path: The candidate took the same path.
        original_path: The recorded run's nodes, in order.
        candidate_path: The replay's nodes, in order.
        diverged_after: The last node both took before they parted (None: at the start, or same path).
        original_next: Where the recorded run went next there (None: it ended).
        candidate_next: Where the candidate went instead (None: it ended).
        original_status: How the recorded run ended.
        candidate_status: How the replay ended.
        problem: Why the replay could not follow the record (a wait it never answered, an `llm`
            stage it never asked that question), if so: the run is then an error of the batch,
            neither the same path nor diverged.
    """

    run_id: str
    replay_id: str
    same_path: bool
    original_path: list[str]
    candidate_path: list[str]
    diverged_after: str | None
    original_next: str | None
    candidate_next: str | None
    original_status: str
    candidate_status: str
    problem: str | None = None

    @property
    def unanswered(self) -> bool:
        """The record ran out before the paths parted: an error of the batch, not a divergence.

        A candidate that first takes another route (a loop sent round once more) and then asks
        what the original never asked has diverged, and is counted so, with its problem as a note.
        """
        if self.problem is None:
            return False
        index = replay.first_divergence(self.original_path, self.candidate_path)
        return index is None or index >= len(self.candidate_path) - 1


@dataclass
class WhatIfReport:
    """The corpus replayed against the candidate: each run, and the batch's own report."""

    candidate: AgentDefinition
    batch: BatchReport
    runs: list[WhatIfRun] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Counts: runs, same path, diverged, errors; runs per divergence point and per final status.

        A run the record could not answer before the paths parted (`WhatIfRun.unanswered`) counts
        as an error only.

        Returns:
            The counts, by name.
        """
        answered = [run for run in self.runs if not run.unanswered]
        diverged = [run for run in answered if not run.same_path]
        points = Counter(divergence(run) for run in diverged)
        return {
            "runs": len(self.runs),
            "samePath": len(answered) - len(diverged),
            "diverged": len(diverged),
            "errors": self.batch.summary()["failed"],
            "byDivergence": dict(points.most_common()),
            "byStatus": dict(Counter(f"{run.original_status} -> {run.candidate_status}" for run in self.runs)),
        }

    def to_json(self) -> dict[str, Any]:
        """The report for CI: the candidate, the summary, every run.

        Returns:
            The report as JSON values.
        """
        return {
            "candidate": {
                "agent": self.candidate.agent,
                "version": self.candidate.version,
                "workflowVersion": self.candidate.workflow_version,
            },
            "query": self.batch.query,
            "summary": self.summary(),
            "runs": [asdict(run) for run in self.runs],
            "errors": [{"runId": o.run_id, "reason": o.reason} for o in self.batch.outcomes if o.outcome == "failed"],
        }


async def what_if(
    core: ClientCore,
    store: ArtifactStore,
    query: str,
    candidate: AgentDefinition,
    *,
    rerun_llm: bool = False,
    limit: int | None = None,
    task_queue: str | None = None,
    concurrency: int = 10,
    on_run: Callable[[RunOutcome], None] | None = None,
) -> WhatIfReport:
    """Replay every ended run of the candidate's agent that ``query`` selects against ``candidate``."""
    runs: list[WhatIfRun] = []

    async def one(run_id: str) -> RunOutcome:
        planned = await replay.plan_replay(core, store, run_id, rerun_llm=rerun_llm)
        replayed = planned.events[0].data.get("replayOf") if planned.events else None
        if replayed:  # a replay (what-if or not) is not a recorded run of its own
            return RunOutcome(run_id, "skipped", f"a replay of {replayed}")
        compared = await _replay_on(core, planned, run_id, candidate, task_queue=task_queue)
        runs.append(compared)
        if compared.unanswered:  # the record could not answer it: an error, not a divergence
            return RunOutcome(run_id, "failed", f"could not be replayed: {compared.problem}")
        reason = "same path" if compared.same_path else f"diverged {divergence(compared)}"
        note = f" (then: {compared.problem})" if compared.problem else ""
        return RunOutcome(run_id, "done", reason + note)

    batch = await run_batch(
        core,
        "what-if",
        query,
        one,
        limit=limit,
        concurrency=concurrency,
        on_outcome=on_run,
        scope=f"AgentName = '{candidate.agent}'",
        runs=Scope.ENDED,
    )
    return WhatIfReport(candidate, batch, sorted(runs, key=lambda run: run.run_id))


async def _replay_on(
    core: ClientCore, planned: replay.ReplayPlanned, run_id: str, candidate: AgentDefinition, *, task_queue: str | None
) -> WhatIfRun:
    plan = planned.request.replay
    assert plan is not None
    source = planned.record_definition or planned.request.definition  # a moved run's record: every version's nodes

    def unchanged(node: str | None) -> bool:
        return node is not None and _same_agent(source.nodes.get(node), candidate.nodes.get(node))

    def asks_the_same(node: str | None) -> bool:
        before, after = (source.nodes.get(node or ""), candidate.nodes.get(node or ""))
        return isinstance(before, LlmNode) and isinstance(after, LlmNode) and _question(before) == _question(after)

    # By visit: a loop's Nth visit reuses the original's Nth output, and reads its Nth model calls.
    reuse = {key: event.artifact_uris[0] for key, event in stage_visits(planned.events) if unchanged(event.stage)}
    # An `llm` stage whose bounds changed (turns, budgets, approvals) runs its loop again, each
    # model call answered from the record; one whose question changed gets no recorded answers:
    # the original never asked the model that.
    records = (
        None
        if plan.llm_records is None
        else {key: visit for key, visit in plan.llm_records.items() if asks_the_same(_node_of(key, source))}
    )
    # The candidate makes none of the original's moves: it starts with the values they set.
    given = {name: value for move in plan.moves for name, value in move.request.set.items()}
    request = planned.request.model_copy(
        update={
            "definition": candidate,
            "input": {**planned.request.input, **given},
            "origin": {"replayOf": run_id, "whatIf": candidate.workflow_version},
            "replay": plan.model_copy(update={"reuse": reuse, "moves": [], "by_kind": True, "llm_records": records}),
        }
    )
    replay_id = derived_run_id(run_id, "whatif", uuid.uuid4().hex[:8])
    result = await run_replay(core, request, replay_id, task_queue)
    original, candidate_path = planned.original.path, result.path
    index = replay.first_divergence(original, candidate_path)
    problem = replay.record_problem(result.error_message)
    candidate_status = result.status.value
    if problem and WAIT_RAN_OUT in problem and index is None and planned.original.status is RunStatus.CANCELLED:
        # The original was cancelled while it waited here: its record ends, and the candidate,
        # waiting at the same point, would have been cancelled with it. Same path, not an error.
        problem, candidate_status = None, RunStatus.CANCELLED.value
    return WhatIfRun(
        run_id=run_id,
        replay_id=replay_id,
        same_path=index is None,
        original_path=original,
        candidate_path=candidate_path,
        diverged_after=original[index - 1] if index else None,
        original_next=_at(original, index),
        candidate_next=_at(candidate_path, index),
        original_status=planned.original.status.value,
        candidate_status=candidate_status,
        problem=problem,
    )


def divergence(run: WhatIfRun) -> str:
    """Where a run's paths part, as ``after NODE: original-next -> candidate-next``."""
    return f"after {run.diverged_after or '(start)'}: {run.original_next} -> {run.candidate_next}"


def _node_of(key: str, definition: AgentDefinition) -> str | None:
    """The node of a visit key (``node`` or ``node.vN``) of ``definition``, if it has that node."""
    if key in definition.nodes:
        return key
    node, _, visit = key.rpartition(".v")
    return node if visit.isdigit() and node in definition.nodes else None


def _same_agent(before: Any, after: Any) -> bool:
    """A stage whose output the candidate may reuse: the same kind of stage, agent and version."""
    if not isinstance(before, RunAgentNode | LlmNode) or type(before) is not type(after):
        return False
    if isinstance(before, LlmNode):  # the same prompts, model, schema and bounds; where it goes next may differ
        routing = {"transitions", "next", "compensate"}
        return bool(before.model_dump(exclude=routing) == after.model_dump(exclude=routing))
    return (before.agent, before.agent_version, before.input) == (after.agent, after.agent_version, after.input)


def _question(node: LlmNode) -> dict[str, Any]:
    """What an `llm` node sends the model: its prompts, model and settings, the answer's schema,
    its input, and the tools it offers as the model sees them (name, description, parameters).

    The rest bounds or routes the loop (turns, calls, budgets, timeouts, which calls wait for a
    person, where it goes next) and the record answers it the same, so a candidate that changes
    only those reuses the original's model answers.
    """
    asked = node.model_dump(include=set(QUESTION_FIELDS))
    asked["tools"] = [
        {"name": tool.name, "description": tool.description, "parameters": tool.parameters} for tool in node.tools or ()
    ]
    return asked


def _at(path: list[str], index: int | None) -> str | None:
    return path[index] if index is not None and index < len(path) else None
