"""Messages out: the `send_message` node, and the request a document, signature or test wait sends.

A replay re-decides the path but never contacts people again: it records the action as
replayed instead of sending it.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from dsmo.workflows.common.templating import render
from dsmo.workflows.contracts import activity_io as contracts
from dsmo.workflows.contracts.run_records import WaitCheckpoint
from dsmo.workflows.definition.node_types import SendMessageNode, SendMessageParams
from dsmo.workflows.run.activity_calls import call_or_end
from dsmo.workflows.run.context import Run


async def send_message_node(run: Run, node_id: str, node: SendMessageNode, resume: WaitCheckpoint | None) -> None:
    """The `send_message` node."""
    await send_message(run, node_id, node.parameters)


async def send_message(run: Run, node_id: str, params: SendMessageParams, *, key: str | None = None) -> None:
    """Send one message through its channel (a node, or a wait's timeout action).

    Args:
        run: The run sending it.
        node_id: The node (or timeout action) it is recorded under.
        params: What to send, and to whom.
        key: Its idempotency key, when one step sends it more than once (each timeout of a
            retried wait); by default the step's key for ``node_id``.
    """
    state = run.state
    if run.replay is not None:
        render(params.message, state.variables)  # a missing variable still fails the same way
        _record_sent(run, node_id, {"actionType": "send_message", "replayed": True})
        return
    request = contracts.SendMessageRequest(
        run_id=state.run_id,
        node=node_id,
        message=render(params.message, state.variables),
        to=render(params.to, state.variables) if params.to else None,
        channel=params.channel,
        idempotency_key=key or run.message_key(node_id),
    )
    sent = await call_or_end(
        contracts.SEND_MESSAGE,
        request,
        result_type=contracts.SentMessage,
        node_id=node_id,
        failed=f"send_message {node_id} failed",
        summary=f"{node_id}: send_message",
    )
    _record_sent(run, node_id, {"actionType": "send_message", "messageId": sent.message_id, "channel": sent.channel})


async def send_request(run: Run, node_id: str, kind: str, params: Any, details: dict[str, Any]) -> str:
    """Ask for documents, a signature or a test through the channel; returns the request id."""
    state = run.state
    if run.replay is not None:
        _record_sent(run, node_id, {"actionType": f"request_{kind}", "replayed": True})
        return "replayed"
    request = contracts.SendRequest(
        run_id=state.run_id,
        node=node_id,
        kind=kind,
        to=render(params.to, state.variables) if params.to else None,
        message=render(params.message, state.variables) if params.message else None,
        channel=params.channel,
        details=details,
        idempotency_key=run.message_key(node_id),
    )
    receipt = await call_or_end(
        contracts.SEND_REQUEST,
        request,
        result_type=contracts.RequestReceipt,
        node_id=node_id,
        failed=f"{kind} request {node_id} failed",
        summary=f"{node_id}: request {kind}",
    )
    data = {"actionType": f"request_{kind}", "requestId": receipt.request_id, "channel": receipt.channel}
    _record_sent(run, node_id, data)
    request_id: str = receipt.request_id
    return request_id


def _record_sent(run: Run, node_id: str, data: dict[str, Any]) -> None:
    run.state.audit.record("ACTION_COMPLETED", at=workflow.now(), stage=node_id, data=data)
