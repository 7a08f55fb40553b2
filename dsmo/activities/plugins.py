"""Users' own agents, actions and channels: the decorators that register them.

A plugin is a Python module whose import registers things with these decorators; a worker
imports its plugins at start (`dsmo worker --load MODULE`, `DSMO_LOAD`, or the `dsmo.plugins`
entry points of installed distributions) and serves what they registered. DSMO's own channels
are plugins too, and so are its examples (the `dsmo_examples` distribution, loaded when asked).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from dsmo.activities.actions import ActionFn, ActionRegistry, FunctionAction
from dsmo.activities.contract_schemas import SchemaSource
from dsmo.activities.messaging import ChannelFactory, ChannelRegistry
from dsmo.activities.plugin_errors import PluginError
from dsmo.activities.processors import ProcessorFn, check_takes, default_registry
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN

F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(AGENT_NAME_PATTERN)  # what definitions accept for agents, actions and channels

# What the decorators fill; `default_registry` (the processors) lives with the processors.
default_actions = ActionRegistry()
default_channels = ChannelRegistry()


def agent(
    name: str,
    *,
    version: str = "1.0.0",
    description: str = "",
    input_schema: SchemaSource | None = None,
    output_schema: SchemaSource | None = None,
    summary_schema: SchemaSource | None = None,
    blocking: bool = False,
) -> Callable[[ProcessorFn], ProcessorFn]:
    """Register a processor that `run_agent` nodes can name.

    The function takes the stage's input document and its message (`StageMessage`: run id,
    stage, artifact URIs, attempt, idempotency key) and returns ``(document, summary)`` or a
    `ProcessorOutput`. It may be a plain function (run on the worker's processor threads) or an
    ``async def`` (run on the worker's event loop, so it must never block: every run on the
    worker waits while it does). It cannot choose the next node.

    Args:
        name: The agent's name, as nodes write it (``agent: risk-score``).
        version: Its version; a node may pin one with ``agentVersion``, else it gets the latest.
        description: One line for `dsmo agents list` (default: the docstring's first line).
        input_schema: A pydantic model class or a JSON Schema the input document must match.
        output_schema: The same, for the output document.
        summary_schema: The same, for the summary transitions read.
        blocking: For an ``async def`` that calls blocking code (a synchronous client, a long
            computation): it then runs on its own event loop in a processor thread.

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        PluginError: The name is invalid, a schema does not compile, the function does not take
            ``(document, message)``, or another function has this name and version.

    Example:
        ```python
        @dsmo.agent("risk-score", version="1.0.0", input_schema=Applicant)
        async def risk_score(document, message):
            return {"score": 0.2}, {"band": "low"}
        ```

    A document that does not match its schema fails the stage as a contract violation: the
    run takes the definition's fail-safe route.
    """
    _check_name(name, "agent")
    return default_registry.register(
        name,
        version,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        summary_schema=summary_schema,
        blocking=blocking,
    )


def action(name: str, *, compensate: ActionFn | None = None) -> Callable[[F], F]:
    """Register a side effect that `invoke` nodes can name, and its compensation.

    Both functions take ``(data, ctx)``: the action its input and an `ActionContext`, the
    compensation the action's output and a context whose key is the compensation's. Each must
    apply its effect once per ``ctx.key`` (the saga retries and repeats calls with the same
    key). Either may be an ``async def``. A compensation that returns ``False`` says it had
    nothing left to undo.

    Args:
        name: The action's name, as nodes write it (``action: reserve-stock``).
        compensate: Undoes the action when a later step fails (none: not compensatable).

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        PluginError: The name is invalid, a function does not take ``(data, ctx)``, or another
            action has this name.
    """
    _check_name(name, "action")
    if compensate is not None:
        check_takes(compensate, f"action {name} compensation", "(output, ctx)")

    def decorate(fn: F) -> F:
        check_takes(fn, f"action {name}", "(data, ctx)")
        default_actions.add(FunctionAction(name, fn, compensate))
        return fn

    return decorate


def channel(name: str) -> Callable[[ChannelFactory], ChannelFactory]:
    """Register a messaging channel that `send_message` and request nodes can name.

    The decorated factory takes the worker's `Settings` and returns the channel, or ``None``
    when the channel is not configured on this worker (it is then not offered). A channel has
    ``send(message) -> SentMessage`` and, to carry document, signature and test requests,
    ``request(request) -> RequestReceipt``; both must deliver once per ``idempotency_key``.

    Args:
        name: The channel's name, as nodes write it (``channel: sms``).

    Returns:
        A decorator that registers the factory and returns it unchanged.

    Raises:
        PluginError: The name is invalid, the factory does not take one argument, or another
            factory has this name.
    """
    _check_name(name, "channel")

    def decorate(factory: ChannelFactory) -> ChannelFactory:
        check_takes(factory, f"channel {name}", "(settings)", arguments=1)
        default_channels.add(name, factory)
        return factory

    return decorate


def _check_name(name: str, kind: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PluginError(f"{kind} {name!r}: a name is lower case letters, digits and dashes (at most 63)")
