"""StartDebouncer: gathers the starts of one debounced key value that come close together into one run.

A definition's ``debounce: {key, period, mode}`` sends each start of a key value to that value's
debouncer (id ``dsmo-debounce.{agent}.{digest}``, created by the first start) instead of starting
a run. The first start of a batch reserves the run's id, which every start of the batch is
given back. Once ``period`` passes with no new start, the debouncer starts the run: with the last
start's input (``mode: last``), or with every input, in order, as ``inputs`` (``mode: all``; a
batch that reaches `DEBOUNCE_MAX_INPUTS` inputs, or whose inputs reach `BATCH_BYTES`, starts at once,
and a start that would not fit waits for it and opens the next). The run is started as a child the
debouncer leaves to itself (it outlives it), and takes any concurrency slots as any run does.
The debouncer continues as new before its history grows long and ends a minute after its last batch.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from pydantic import Field

    from dsmo.workflows.common import search_attributes as sa
    from dsmo.workflows.common.patches import NEXT_EXECUTION
    from dsmo.workflows.common.status import RunStatus
    from dsmo.workflows.common.wire import WireModel
    from dsmo.workflows.contracts.run_records import ExecutionRequest
    from dsmo.workflows.definition.flow_control import DEBOUNCE_MAX_INPUTS
    from dsmo.workflows.definition.model import AgentDefinition
    from dsmo.workflows.flow.long_lived import hand_over_when_long

IDLE_GRACE = timedelta(minutes=1)
# The most a batch's inputs and definition weigh (JSON bytes): the run's input, and the
# debouncer's own continue-as-new input, travel in one payload Temporal caps at 2 MB.
BATCH_BYTES = 1_000_000
BATCH_TOO_LARGE = "DebounceInputTooLarge"


def weight(document: object) -> int:
    """A document's size as JSON, in bytes (as Temporal's converter writes it, near enough)."""
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str).encode())


class DebounceState(WireModel):
    """A debouncer's state, carried across continue-as-new.

    Attributes:
        definition: The definition the batch's run follows (the latest start's).
        key: The key's value.
        run_id: The id reserved for the open batch's run (None: no batch open).
        inputs: The open batch's inputs (``mode: last`` keeps the last one only).
        gathered: How many starts the open batch has gathered.
    """

    definition: AgentDefinition
    key: str
    run_id: str | None = None
    inputs: list[dict[str, Any]] = Field(default_factory=list)
    gathered: int = 0


class DebounceAnswer(WireModel):
    """What a debounced start is told: the run its batch becomes, and how many starts it gathered."""

    run_id: str
    gathered: int


@workflow.defn(name="StartDebouncer")
class StartDebouncer:
    @workflow.init
    def __init__(self, state: DebounceState) -> None:
        self._state = state
        self._changed = False
        self._closing = False  # a start waits for the open batch to start: it does not fit in it
        self._batch_bytes = sum(weight(each) for each in state.inputs)  # the open batch's inputs

    @workflow.run
    async def run(self, state: DebounceState) -> None:
        while True:
            if self._state.run_id is None:  # no batch open: wait for the next start, or end
                try:
                    await workflow.wait_condition(lambda: self._state.run_id is not None, timeout=IDLE_GRACE)
                except TimeoutError:
                    return
                continue
            debounce = self._state.definition.debounce
            assert debounce is not None
            full = len(self._state.inputs) >= DEBOUNCE_MAX_INPUTS or self._closing
            self._changed = False
            try:
                if not full:
                    await workflow.wait_condition(lambda: self._changed or self._closing, timeout=debounce.period)
                    continue  # another start: the key must be quiet for a whole period again
            except TimeoutError:
                pass
            await self._start_batch()
            await hand_over_when_long(self._state)

    @workflow.update
    async def add(self, request: dict[str, Any]) -> DebounceAnswer:
        """One more start of the key value: gathered into the open batch (opened if none is).

        A start the open batch has no room for (`DEBOUNCE_MAX_INPUTS` inputs, or `BATCH_BYTES`)
        waits until that batch has started, and opens the next: a batch never passes either.
        """
        state = self._state
        definition = AgentDefinition.model_validate(request["definition"])
        debounce = definition.debounce
        assert debounce is not None
        started_input = dict(request.get("input") or {})
        size = weight(started_input) if debounce.mode == "all" else 0
        while state.run_id is not None and not self._fits(weight(request["definition"]) + size):
            await self._next_batch(state.run_id)
        state.definition = definition
        if state.run_id is None:
            state.run_id = f"{state.definition.agent}-{workflow.uuid4().hex[:12]}"
        state.inputs = [*state.inputs, started_input] if debounce.mode == "all" else [started_input]
        self._batch_bytes += size
        state.gathered += 1
        self._changed = True
        return DebounceAnswer(run_id=state.run_id, gathered=state.gathered)

    @add.validator
    def _refuse_too_large(self, request: dict[str, Any]) -> None:
        """Refuse, before anything is written, a start whose input and definition alone exceed a batch."""
        size = weight(request.get("input") or {}) + weight(request.get("definition") or {})
        if size > BATCH_BYTES:
            raise ApplicationError(
                f"input: the start weighs {size:,} bytes with its definition; a debounced batch "
                f"carries at most {BATCH_BYTES:,}",
                type=BATCH_TOO_LARGE,
                non_retryable=True,
            )

    def _fits(self, size: int) -> bool:
        """Whether the open batch takes one more start weighing ``size`` bytes with its definition."""
        if self._state.definition.debounce is not None and self._state.definition.debounce.mode != "all":
            return True  # ``mode: last`` keeps one input
        return len(self._state.inputs) < DEBOUNCE_MAX_INPUTS and self._batch_bytes + size <= BATCH_BYTES

    async def _next_batch(self, open_batch: str) -> None:
        """Have the open batch start now, and wait until it has (the loop starts it)."""
        self._closing = True
        await workflow.wait_condition(lambda: self._state.run_id != open_batch)

    @workflow.query
    def snapshot(self) -> DebounceState:
        return self._state

    async def _start_batch(self) -> None:
        state = self._state
        definition, debounce = state.definition, state.definition.debounce
        run_id, inputs, gathered = state.run_id, state.inputs, state.gathered
        assert debounce is not None and run_id is not None
        # Closed before the run starts: a start arriving meanwhile opens the next batch.
        state.run_id, state.inputs, state.gathered = None, [], 0
        self._closing, self._batch_bytes = False, 0
        run_input = inputs[-1] if debounce.mode == "last" else {"inputs": inputs}
        await workflow.start_child_workflow(
            "AgentExecution",
            # The run runs here: its key locks too (only the command's first sending reads it).
            ExecutionRequest(
                definition=definition,
                input=run_input,
                origin={"debouncedStarts": str(gathered), "debounceKey": state.key},
            )
            .started_on(workflow.info().task_queue)
            .model_copy(update=NEXT_EXECUTION),  # started for this code: no marker per change
            id=run_id,
            parent_close_policy=ParentClosePolicy.ABANDON,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.AGENT_EXECUTION_STATUS, RunStatus.PENDING.value),
                    SearchAttributePair(sa.AGENT_NAME, definition.agent),
                    SearchAttributePair(sa.WORKFLOW_VERSION, definition.workflow_version),
                ]
            ),
        )
        workflow.logger.info("Debounced %d start(s) of %s into %s", gathered, state.key, run_id)
