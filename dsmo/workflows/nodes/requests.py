"""The `request_document`, `request_signature` and `assign_test` nodes: ask once, then wait.

The request goes out through the node's channel (send_message.py) and the run waits for its
completion event (waits.py). A run resumed from a checkpoint inside the wait does not ask again.
"""

from __future__ import annotations

from typing import Any

from dsmo.workflows.common.templating import render, render_values
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.definition.node_types import AssignTestNode, RequestDocumentNode, RequestSignatureNode, WaitOptions
from dsmo.workflows.nodes.send_message import send_request
from dsmo.workflows.nodes.waits import await_event
from dsmo.workflows.run.context import Run


async def request_document_node(
    run: Run, node_id: str, node: RequestDocumentNode, resume: WaitCheckpoint | None
) -> None:
    """Ask for documents; wait until every one is uploaded."""
    docs = node.parameters
    details = {"documents": list(docs.documents)}
    await _request_and_wait(run, node_id, "document", docs, details, resume, requested=list(docs.documents))


async def request_signature_node(
    run: Run, node_id: str, node: RequestSignatureNode, resume: WaitCheckpoint | None
) -> None:
    """Ask for a signature; wait until it is signed."""
    sign = node.parameters
    await _request_and_wait(run, node_id, "signature", sign, {"document": sign.document}, resume)


async def assign_test_node(run: Run, node_id: str, node: AssignTestNode, resume: WaitCheckpoint | None) -> None:
    """Assign a test; wait until it is completed."""
    await _request_and_wait(run, node_id, "test", node.parameters, {"test": node.parameters.test}, resume)


async def _request_and_wait(
    run: Run,
    node_id: str,
    kind: str,
    params: WaitOptions,
    details: dict[str, Any],
    resume: WaitCheckpoint | None,
    *,
    requested: list[str] | None = None,
) -> None:
    details = render_values(details, run.state.variables)
    data: dict[str, Any] = dict(details)
    if resume is None:
        data["requestId"] = await send_request(run, node_id, kind, params, details)
        recipient = getattr(params, "to", None)
        if recipient:  # whom the task is on: shown in the WAITING structure, searchable as WaitingOn
            data["to"] = render(recipient, run.state.variables)
    await await_event(run, node_id, kind, params, data, requested=requested, resume=resume)
