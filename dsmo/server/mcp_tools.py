"""The tools `dsmo mcp` serves: DSMO's runs, tasks and decisions for an assistant, one scope each.

Each tool asks the caller's API key for the scope the ingress asks for the same act (`read`,
`start`, `events:<TYPE>`; decisions only by their own name, never by `events:*`) and records who
decided as the key's name, as the ingress does. DSMO's own refusals pass through as the tool's
one-line error; they name the field or option at fault.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import Field

from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.task_list import PERSON_WAITS, TaskFilter, task_page
from dsmo.server.api_keys import DECISION_EVENTS, ApiKey

# A tool call's context: FastMCP injects it into the parameter annotated with it.
ToolContext = Context[Any, Any, Any]
# Resolves the caller's key for a tool call and checks it holds the scope (raises a tool error).
KeyCheck = Callable[[ToolContext, str], ApiKey]

RunId = Annotated[str, Field(description="The run's id (as start_run or list_tasks gave it).")]
EventId = Annotated[
    str | None,
    Field(description="Idempotency id of this event: the same id again is a duplicate, not a second event."),
]
Reason = Annotated[str | None, Field(description="Why, recorded in the run's audit trail.")]
OnBehalfOf = Annotated[
    str | None, Field(description="The person you decide for; recorded beside the key's name as who decided.")
]

_READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)


def decided_by(key: ApiKey, claimed: str | None) -> str:
    """Who decided, as the ingress records it: the key's name, with who its holder says they are."""
    return f"{key.name} ({claimed[:120]})" if claimed else key.name


class DsmoTools:
    """The tools, over one connected client; `register` adds them to a FastMCP server.

    Args:
        client: The connected DSMO client the tools ask.
        check: Resolves the caller's key for a call and refuses one without the scope.
    """

    def __init__(self, client: DsmoClient, check: KeyCheck) -> None:
        self._client = client
        self._check = check

    def register(self, mcp: FastMCP) -> None:
        """Add every tool to ``mcp``; a tool's description is its method's docstring."""
        reads: list[Callable[..., Any]] = [self.list_agents, self.run_status, self.run_events, self.list_tasks]
        writes: list[Callable[..., Any]] = [self.start_run, self.respond, self.deliver_event, self.decide]
        for tool in reads:
            mcp.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""), annotations=_READ)
        for tool in [*writes, self.decide_budget]:
            mcp.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""), annotations=_WRITE)

    async def list_agents(self, ctx: ToolContext) -> dict[str, Any]:
        """List the published agents a run can be started of: each one's latest version and all its versions.

        Needs the scope `read`.
        """
        self._check(ctx, "read")
        agents = await self._client.definitions.list()
        return {"agents": [{"agent": a.agent, "latest": a.latest, "versions": a.versions} for a in agents]}

    async def start_run(
        self,
        ctx: ToolContext,
        agent: Annotated[str, Field(description="The published agent's name (see list_agents).")],
        input: Annotated[dict[str, Any] | None, Field(description="The run's input variables.")] = None,
        version: Annotated[
            str | None, Field(description="A published version, its workflow_version or its label (default: latest).")
        ] = None,
        run_id: Annotated[str | None, Field(description="The run's id (default: <agent>-<random>).")] = None,
    ) -> dict[str, Any]:
        """Start a run of a published agent with input variables; returns its id and where to watch it.

        Needs the scope `start`.
        """
        self._check(ctx, "start")
        definition = await self._client.definition(agent, version)
        report = (await self._client.start(definition, input or {}, run_id=run_id)).started
        return {
            "runId": report.run_id,
            "agent": definition.agent,
            "workflowVersion": definition.workflow_version,
            "status": report.status,
            "url": self._client.settings.temporal.run_url(report.run_id),
        }

    async def run_status(self, ctx: ToolContext, run_id: RunId) -> dict[str, Any]:
        """Read where a run stands: its status, current node, what it waits for (waitingFor, waitingData,
        waitingUntil) and, once ended, how. The same JSON as the ingress's GET /executions/{id}.

        Needs the scope `read`.
        """
        self._check(ctx, "read")
        return (await self._client.run(run_id).status()).model_dump(mode="json")

    async def run_events(
        self,
        ctx: ToolContext,
        run_id: RunId,
        after: Annotated[int | None, Field(description="Events after this sequence number (nextAfter).")] = None,
        before: Annotated[int | None, Field(description="Events before this number (previousBefore).")] = None,
        limit: Annotated[int, Field(description="At most this many events (1 to 1000).")] = 50,
    ) -> dict[str, Any]:
        """Read one page of a run's audit trail (with neither cursor: the latest events), and the cursors of
        the pages next to it.

        Needs the scope `read`.
        """
        self._check(ctx, "read")
        page = await self._client.run(run_id).events_page(after=after, before=before, limit=limit)
        return {
            "events": [event.model_dump(mode="json") for event in page.events],
            "total": page.total,
            "nextAfter": page.next_after,
            "previousBefore": page.previous_before,
        }

    async def list_tasks(
        self,
        ctx: ToolContext,
        kind: Annotated[str | None, Field(description=f"One of {', '.join(PERSON_WAITS)}.")] = None,
        agent: Annotated[str | None, Field(description="Only runs of this agent.")] = None,
        assignee: Annotated[str | None, Field(description="Only tasks waiting on this person.")] = None,
        overdue: Annotated[bool, Field(description="Only tasks past their due time.")] = False,
        run: Annotated[str | None, Field(description="A run id or the start of one.")] = None,
        page: Annotated[str | None, Field(description="The nextPage of the previous answer.")] = None,
    ) -> dict[str, Any]:
        """List the runs waiting for a person (a reply, a document, a signature, an approval, a budget, ...),
        newest first, 25 a page.

        Needs the scope `read`.
        """
        self._check(ctx, "read")
        now = datetime.now(UTC)
        found = await task_page(self._client.core, TaskFilter(kind, agent, assignee, overdue, run), now, page=page)
        tasks = [
            {
                "runId": task.run_id,
                "agent": task.agent,
                "kind": task.kind,
                "assignee": task.assignee,
                "due": task.due.isoformat() if task.due else None,
                "overdue": task.overdue(now),
                "since": task.since.isoformat() if task.since else None,
            }
            for task in found.tasks
        ]
        return {"tasks": tasks, "total": found.total, "nextPage": found.next_page}

    async def respond(
        self,
        ctx: ToolContext,
        run_id: RunId,
        text: Annotated[str, Field(description="The person's reply.")],
        event_id: EventId = None,
    ) -> dict[str, Any]:
        """Deliver a person's reply (MESSAGE_RECEIVED) to a run waiting for a response (kept for its wait if it
        arrives early).

        Needs the scope `events:MESSAGE_RECEIVED` (or `events:*`).
        """
        self._check(ctx, "events:MESSAGE_RECEIVED")
        return (await self._client.run(run_id).respond(text, event_id=event_id)).model_dump(mode="json")

    async def deliver_event(
        self,
        ctx: ToolContext,
        run_id: RunId,
        event_type: Annotated[str, Field(description="The resume event: DOCUMENT_UPLOADED, SIGNATURE_COMPLETED, ...")],
        data: Annotated[dict[str, Any] | None, Field(description="The event's fields.")] = None,
        event_id: EventId = None,
    ) -> dict[str, Any]:
        """Deliver any resume event to a run; the run checks it and answers whether it was applied, kept for a
        later wait, or a duplicate.

        Needs the scope `events:<event_type>` (`events:*` grants every type but the decisions).
        """
        key = self._check(ctx, f"events:{event_type}")
        fields = dict(data or {})
        if event_type in DECISION_EVENTS:  # who decided is the key, as over the ingress
            claimed = fields.get("by")
            fields["by"] = decided_by(key, claimed if isinstance(claimed, str) else None)
        return (await self._client.run(run_id).deliver(event_type, fields, event_id=event_id)).model_dump(mode="json")

    async def decide(
        self,
        ctx: ToolContext,
        run_id: RunId,
        decision: Annotated[str, Field(description="approve, edit (with arguments) or reject.")],
        arguments: Annotated[dict[str, Any] | None, Field(description="With edit: the call's arguments.")] = None,
        reason: Reason = None,
        call: Annotated[str | None, Field(description="The call decided (waitingData.call).")] = None,
        on_behalf_of: OnBehalfOf = None,
        event_id: EventId = None,
    ) -> dict[str, Any]:
        """Decide the tool call a run waits on for approval (waitingFor: approval): approve it, edit its
        arguments, or reject it (the model reads the reason).

        Needs the scope `events:TOOL_DECIDED` (never granted by `events:*`).
        """
        key = self._check(ctx, "events:TOOL_DECIDED")
        ack = await self._client.run(run_id).decide(
            decision,
            arguments=arguments,
            reason=reason,
            call=call,
            by=decided_by(key, on_behalf_of),
            event_id=event_id,
        )
        return ack.model_dump(mode="json")

    async def decide_budget(
        self,
        ctx: ToolContext,
        run_id: RunId,
        decision: Annotated[str, Field(description="raise (with a new limit) or stop.")],
        tokens: Annotated[int | None, Field(description="With raise: the new token limit.")] = None,
        cost_usd: Annotated[float | None, Field(description="With raise: the new limit in US dollars.")] = None,
        model_calls: Annotated[int | None, Field(description="With raise: the new limit of model calls.")] = None,
        reason: Reason = None,
        on_behalf_of: OnBehalfOf = None,
        event_id: EventId = None,
    ) -> dict[str, Any]:
        """Raise the spent budget a run waits on (waitingFor: budget), or stop it.

        Needs the scope `events:BUDGET_DECIDED` (never granted by `events:*`).
        """
        key = self._check(ctx, "events:BUDGET_DECIDED")
        ack = await self._client.run(run_id).decide_budget(
            decision,
            tokens=tokens,
            cost_usd=cost_usd,
            model_calls=model_calls,
            reason=reason,
            by=decided_by(key, on_behalf_of),
            event_id=event_id,
        )
        return ack.model_dump(mode="json")
