"""The `run_tool` activity: make one tool call a model proposed and the run accepted, and record it.

The call's arguments are read from the turn's answer in the store (never from workflow history),
its action runs with an idempotency key per call, and its record (the arguments, then the result
or the error) is written once beside the turn: ``.../{node or node.vN}/tools/{n}.json``. A retried
attempt that finds the record returns it instead of calling again.

A call that waited for approval carries the person's decision: an edit is made with their arguments
(the model's are kept in the record as ``proposedArguments``), a rejection is not made at all and
its reason is the record's error. An action that refuses the call (`InvalidInput`, `ActionRefused`:
an unknown order, a refund over the limit) does not fail the stage: the refusal is the call's
result, and the model reads it on its next turn. A result larger than `RESULT_MAX_BYTES` is refused
the same way. Anything else is transient: Temporal retries the call under the node's retry policy,
with the same key.

A replay makes no call: the original's record of the same visit and call answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import activity

from dsmo.activities.actions import ActionContext, ActionRegistry, CompensableAction
from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore, encode_json
from dsmo.activities.heartbeats import heartbeating
from dsmo.activities.maybe_async import call_maybe_async
from dsmo.activities.mcp_calls import McpServers, call_mcp_tool
from dsmo.activities.plugin_errors import ActionRefused, InvalidInput, permanent_errors
from dsmo.workflows.contracts.tool_io import RUN_TOOL, TOOL_RECORD_KIND, ToolResult, ToolTask

if TYPE_CHECKING:
    from dsmo.config.settings import Settings

T = TypeVar("T")
RESULT_MAX_BYTES = 256 * 1024  # one call's result as the model reads it; past this it is refused
DEFAULT_MCP_TIMEOUT = timedelta(seconds=30)


def tool_record_key(task: ToolTask) -> str:
    """Where the call's record is written: beside the turn's attempts, one per call."""
    return f"artifacts/{task.workflow_version}/{task.run_id}/{task.stage_path}/tools/{task.index}.json"


class ToolActivities:
    """The `run_tool` activity over one action registry and one artifact store."""

    def __init__(
        self,
        registry: ActionRegistry,
        store: ArtifactStore,
        executor: Executor,
        settings: Settings | None = None,
        mcp_servers: McpServers | None = None,
    ) -> None:
        self.registry = registry
        self.store = store
        self.executor = executor
        self.settings = settings
        self.mcp_servers = dict(mcp_servers or {})

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    @activity.defn(name=RUN_TOOL)
    @permanent_errors
    async def run_tool(self, task: ToolTask) -> ToolResult:
        """Make the call (or, in a replay, read the original's record); its record's address.

        Raises:
            UnknownAction: No registered action answers to the tool's action.
            InvalidInput: A replay whose original has no record of this call.
        """
        if task.recorded_at is not None:
            return await self._recorded(task, f"{task.recorded_at}tools/{task.index}.json")
        key = tool_record_key(task)
        try:  # an earlier attempt wrote its record and then died: the call is done
            return await self._result(task, self.store.uri(key), recorded=False)
        except ArtifactMissing:
            pass
        action = self.registry.get(task.action) if task.action is not None else None
        answer = await self._io(lambda: self.store.read_json(task.answer_uri, seal=task.seal))
        call = answer["output"]["toolCalls"][task.index - 1]
        if call.get("id") != task.call_id:
            raise InvalidInput(f"tool {task.tool}: call {task.index} of {task.answer_uri} is not {task.call_id}")
        attempt = activity.info().attempt
        ctx = ActionContext(task.run_id, task.stage_path, task.idempotency_key, attempt, self.settings)
        decision = task.decision
        proposed = call.get("arguments", {})
        record: dict[str, Any] = {
            "kind": TOOL_RECORD_KIND,
            "tool": task.tool,
            **(
                {"action": task.action}
                if task.action
                else {"node": task.node}
                if task.node
                else {"mcp": f"{task.mcp_server}/{task.mcp_tool}"}
            ),
            "callId": task.call_id,
            "arguments": decision.arguments if decision is not None and decision.arguments is not None else proposed,
            "idempotencyKey": task.idempotency_key,
            "attempt": attempt,
        }
        if decision is not None:  # it waited for a person: what they decided, and what was proposed
            record["decision"] = decision.model_dump(mode="json", exclude_none=True)
            if decision.decision == "edit":
                record["proposedArguments"] = proposed
        where = f"run {task.run_id}, tool call {task.stage_path}/{task.index}"
        try:
            if decision is not None and decision.decision == "reject":
                why = decision.reason or "no reason given"
                # No one decided in time (a timeout decides, not a person): the call was not made.
                raise ActionRefused(f"a person ({decision.by}) rejected this call: {why}" if decision.by else why)
            if task.output is not None:  # a node of the graph made the call: its outcome is the result
                output: Any = task.output
            else:
                output = await self._call(task, action, record["arguments"], ctx, where)
        except (InvalidInput, ActionRefused) as refused:
            record["error"] = str(refused).splitlines()[0][:500] if str(refused) else type(refused).__name__
        else:
            size = len(encode_json(output))
            if size > RESULT_MAX_BYTES:
                record["error"] = f"the result is {size:,} bytes; a tool's result is at most {RESULT_MAX_BYTES:,}"
            else:
                record["output"] = output
        stored = await self._io(lambda: self.store.put_json_once(key, record, seal=task.seal))
        # Another attempt may have written first (a reset, a duplicate task): its record stands.
        return await self._result(task, stored.uri, recorded=False)

    async def _call(
        self,
        task: ToolTask,
        action: CompensableAction | None,
        arguments: dict[str, Any],
        ctx: ActionContext,
        where: str,
    ) -> Any:
        """The action's output, or the MCP tool's (heartbeating while it runs).

        Raises:
            ActionRefused: The MCP tool answered with an error (the call's result).
        """
        async with heartbeating():
            if action is not None:
                return await call_maybe_async(
                    self.executor, action.execute, arguments, ctx, who=("action", action.name, where)
                )
            assert task.mcp_server is not None and task.mcp_tool is not None
            output, error = await call_mcp_tool(
                self.mcp_servers,
                task.mcp_server,
                task.mcp_tool,
                arguments,
                task.idempotency_key,
                activity.info().start_to_close_timeout or DEFAULT_MCP_TIMEOUT,
            )
            if error is not None:
                raise ActionRefused(error)
            return output

    async def _recorded(self, task: ToolTask, uri: str) -> ToolResult:
        """The original's record of this call, if it is the same call (a replay acts on nothing).

        Raises:
            InvalidInput: The original made no such call, or another (``replay diverged: ...``).
        """
        try:
            record = await self._io(lambda: self.store.read_json(uri, seal=task.seal))
        except ArtifactMissing:
            raise InvalidInput(
                f"replay diverged: the original has no record of call {task.index} ({task.tool}) at {uri}; "
                "the turn asked for calls the original did not make, and a replay makes none"
            ) from None
        answer = await self._io(lambda: self.store.read_json(task.answer_uri, seal=task.seal))
        asked = answer["output"]["toolCalls"][task.index - 1].get("arguments", {})
        proposed = record.get("proposedArguments", record.get("arguments"))  # a person may have edited them
        if record.get("tool") != task.tool or proposed != asked:
            raise InvalidInput(
                f"replay diverged: call {task.index} was {record.get('tool')} with other arguments in the original; "
                f"the replay asked {task.tool}, and a replay makes no call"
            )
        return await self._result(task, uri, recorded=True)

    async def _result(self, task: ToolTask, uri: str, *, recorded: bool) -> ToolResult:
        body = await self._io(lambda: self.store.read_bytes(uri, seal=task.seal))
        record = json.loads(body)
        error = record.get("error")
        return ToolResult(
            uri=uri,
            sha256=hashlib.sha256(body).hexdigest(),
            ok=error is None,
            error=error,
            attempt=int(record.get("attempt", 1)),
            recorded=recorded,
        )
