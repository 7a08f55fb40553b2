"""Starting a run of a debounced definition: the start joins its key value's batch instead.

Each start goes to its key value's debouncer (`workflows/flow/debouncer.py`) in one step that
creates it if needed (update-with-start), and is told the id of the run its batch becomes. The
run starts once the key value has had no start for the definition's ``period``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dsmo.client.client_errors import InvalidInputDocument
from dsmo.client.core import ClientCore
from dsmo.client.flow_starts import StartReport
from dsmo.client.with_start import update_with_start
from dsmo.workflows.contracts.run_records import ExecutionRequest
from dsmo.workflows.definition.flow_control import FlowControlError, render_key
from dsmo.workflows.flow.debouncer import BATCH_BYTES, DebounceAnswer, DebounceState, weight


def debounced(request: ExecutionRequest) -> bool:
    """Whether a start of ``request`` joins a batch (a new run of a debounced definition)."""
    return request.definition.debounce is not None and request.replay is None and request.checkpoint is None


def debouncer_id(agent: str, key: str) -> str:
    """The id of one key value's debouncer."""
    return f"dsmo-debounce.{agent}.{hashlib.sha256(key.encode()).hexdigest()[:24]}"


async def join_batch(
    core: ClientCore, request: ExecutionRequest, task_queue: str, *, idempotency_key: str | None = None
) -> StartReport:
    """Send the start to its key value's batch; the run it becomes, and how many starts it gathered.

    A start sent again with its ``idempotency_key`` (and the same input and definition) while the
    debouncer runs joins the batch once and is answered as the first time; another start under
    the same key is a start of its own (the key and the start are the update's id).

    Raises:
        InvalidInputDocument: The input lacks the value the debounce key reads, or the input and
            definition together weigh more than a batch carries (`BATCH_BYTES`).
    """
    definition = request.definition
    debounce = definition.debounce
    assert debounce is not None
    try:
        key = render_key("debounce.key", debounce.key, request.input)
    except FlowControlError as err:
        raise InvalidInputDocument(f"input: {err}") from None
    ask: dict[str, Any] = {"input": request.input, "definition": definition.model_dump(mode="json", exclude_none=True)}
    size = weight(ask["input"]) + weight(ask["definition"])
    if size > BATCH_BYTES:  # refused here: Temporal would refuse the request itself past 2 MB
        raise InvalidInputDocument(
            f"input: the start weighs {size:,} bytes with its definition; "
            f"a debounced batch carries at most {BATCH_BYTES:,}"
        )
    state = DebounceState(definition=definition, key=key)
    answer = await update_with_start(
        core.temporal,
        core.update_gates,
        "StartDebouncer",
        state,
        debouncer_id(definition.agent, key),
        task_queue,
        "add",
        ask,
        DebounceAnswer,
        what=f"debounce ({key})",
        update_id=None if idempotency_key is None else _update_id(idempotency_key, ask),
    )
    return StartReport(
        answer.run_id, "debounced", gathered=answer.gathered, debouncer=debouncer_id(definition.agent, key)
    )


def _update_id(idempotency_key: str, ask: dict[str, Any]) -> str:
    """The debouncer update's id for a start: its key, agent and input.

    Only the same start sent again is answered as a retry; another body under the key is never
    dropped.
    """
    # The agent and input, not the definition: a retry after a new version is published is the
    # same start (over HTTP the ingress adds the whole body's fingerprint to the key).
    start = json.dumps(
        [ask["definition"].get("agent"), ask["input"]], sort_keys=True, separators=(",", ":"), default=str
    )
    digest = hashlib.sha256(idempotency_key.encode() + b"\n" + start.encode()).hexdigest()
    return f"start-{digest}"
