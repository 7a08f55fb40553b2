"""The node types of an agent definition, one per action type, with their parameters.

Every wait has the same timeout options; a missing timeout takes the kind's default and one
above the kind's maximum is refused when the definition is validated.

Longer than most modules on purpose: the node models form one tagged union (`Node`, keyed by
``actionType``) that pydantic resolves as a whole, and the shared timeout table sits beside the
models that read it; each model is short.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from dsmo.workflows.common.durations import Duration, format_duration
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN
from dsmo.workflows.common.wire import CamelModel
from dsmo.workflows.definition.flow_control import Throttle
from dsmo.workflows.definition.tools import ToolSpec

# The seed's timeout table, per waiting kind: (default, maximum). `event` is not in the seed's
# table; it gets the same bounds as the other human actions (document, signature, test).
WAIT_TIMEOUTS: dict[str, tuple[timedelta, timedelta]] = {
    "response": (timedelta(hours=24), timedelta(days=7)),
    "agent": (timedelta(hours=1), timedelta(hours=24)),
    "document": (timedelta(days=7), timedelta(days=30)),
    "signature": (timedelta(days=7), timedelta(days=30)),
    "test": (timedelta(days=7), timedelta(days=30)),
    "event": (timedelta(days=7), timedelta(days=30)),
    # A proposed tool call waiting for a person's decision (not in the seed).
    "approval": (timedelta(days=3), timedelta(days=30)),
    # A run or visit that spent its budget, waiting for a person to raise it (not in the seed).
    "budget": (timedelta(days=1), timedelta(days=30)),
}
MAX_DELAY = timedelta(days=30)

OnTimeout = Literal["continue", "fail", "retry"]


class RetrySpec(CamelModel):
    """The central failure policy for a stage: attempts, exponential backoff, jitter."""

    max_attempts: int = Field(default=3, ge=1, le=100)
    initial_interval: Duration = timedelta(seconds=1)
    backoff_coefficient: float = Field(default=2.0, ge=1.0, le=10.0)
    maximum_interval: Duration = timedelta(minutes=5)
    jitter: float = Field(default=0.2, ge=0.0, le=1.0, description="each delay grows by up to this fraction")

    def delay(self, attempt: int, draw: float) -> timedelta:
        """Backoff before attempt ``attempt + 1``; ``draw`` in [0, 1) comes from workflow.random()."""
        base = self.initial_interval.total_seconds() * self.backoff_coefficient ** (attempt - 1)
        capped = min(base, self.maximum_interval.total_seconds())
        return timedelta(seconds=capped * (1 + self.jitter * draw))


class SendMessageParams(CamelModel):
    message: str = Field(min_length=1, max_length=4000)
    to: str | None = Field(default=None, max_length=500)
    channel: str | None = Field(default=None, max_length=100)


class TimeoutAction(CamelModel):
    """An action run when a wait times out (the seed's ``timeoutActions``)."""

    action_type: Literal["send_message"]
    parameters: SendMessageParams


def _timeout_optional(schema: dict[str, Any]) -> None:
    """The JSON Schema says what a document may omit: a wait's timeout has a default per kind."""
    schema["required"] = [name for name in schema.get("required", []) if name != "timeout"]
    if not schema["required"]:
        del schema["required"]


class WaitOptions(CamelModel):
    """What every wait shares: how long, and what happens when that time is up."""

    model_config = ConfigDict(json_schema_extra=_timeout_optional)

    kind: ClassVar[str]

    timeout: Duration
    on_timeout: OnTimeout = "continue"
    max_retries: int = Field(default=1, ge=1, le=10, description="extra waits allowed by onTimeout: retry")
    timeout_actions: list[TimeoutAction] = Field(default_factory=list, max_length=10)

    @model_validator(mode="before")
    @classmethod
    def _default_timeout(cls, data: Any) -> Any:
        # Filled in before validation, so the canonical form (and the version hash) includes it.
        if isinstance(data, dict) and data.get("timeout") is None:
            return {**data, "timeout": format_duration(WAIT_TIMEOUTS[cls.kind][0])}
        return data

    @field_validator("timeout")
    @classmethod
    def _within_maximum(cls, value: timedelta) -> timedelta:
        maximum = WAIT_TIMEOUTS[cls.kind][1]
        if value > maximum:
            raise ValueError(
                f"{format_duration(value)} is above the maximum of {format_duration(maximum)} for {cls.kind} waits"
            )
        return value


class ApprovalWait(WaitOptions):
    """How a tool-using `llm` node waits for a person to decide a call that needs approval.

    ``onTimeout: continue`` rejects the call (the model reads that no one decided in time),
    ``fail`` ends the run with status TIMEOUT, ``retry`` waits again; ``timeoutActions`` are sent
    as for any wait.
    """

    kind: ClassVar[str] = "approval"


class BudgetWait(WaitOptions):
    """How a run whose budget is spent waits for a person to raise it (``waitingFor: budget``).

    ``onTimeout: continue`` goes where a spent budget goes without a wait (``onBudget``, else the
    fail-safe route), ``fail`` ends the run with status TIMEOUT, ``retry`` waits again.
    """

    kind: ClassVar[str] = "budget"


# A budget's limits as a person names them (`BUDGET_DECIDED`), and their fields here.
LIMITS = {"tokens": "tokens", "costUsd": "cost_usd", "modelCalls": "model_calls"}


class Budget(CamelModel):
    """What a run (the definition's ``budget``) or one visit of a tool-using `llm` node (the
    node's) may spend on model calls.

    It is checked before each model call (a node's: after its visit's first): once spent, no
    model is asked again and the run goes to ``onBudget`` (else the fail-safe route). So a run
    stops after the call that crosses it. With ``ask``, it first waits for a person to raise it
    (`BUDGET_DECIDED`), and goes on asking if they do.

    Attributes:
        tokens: Total tokens (prompt and answer, as the endpoint counts them).
        cost_usd: US dollars, at the worker's price table (``DSMO_LLM_PRICES``); calls to a model
            it does not price cost nothing here.
        model_calls: Model calls, repairs of invalid answers included.
        ask: How the run waits for a person to raise it once spent (None: it does not wait).
    """

    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)
    model_calls: int | None = Field(default=None, ge=1, le=100_000)
    ask: BudgetWait | None = None

    @model_validator(mode="after")
    def _bounds_something(self) -> Budget:
        if self.tokens is None and self.model_calls is None and self.cost_usd is None:
            raise ValueError("give tokens, costUsd, modelCalls or some of them")
        return self

    def raised(self, limits: Mapping[str, Any]) -> Budget:
        """This budget with the limits a person raised (``tokens``, ``costUsd``, ``modelCalls``)."""
        return self.model_copy(update={LIMITS[name]: value for name, value in limits.items() if name in LIMITS})

    def spent(self, usage: Mapping[str, int | float]) -> str | None:
        """Why a run or visit that spent ``usage`` may ask no more; None if it may."""
        tokens, calls, cost = usage.get("tokens", 0), usage.get("modelCalls", 0), usage.get("costUsd", 0.0)
        if self.tokens is not None and tokens >= self.tokens:
            return f"{tokens:,} tokens used of a budget of {self.tokens:,}"
        if self.cost_usd is not None and cost >= self.cost_usd:
            return f"{cost:.4f} USD spent of a budget of {self.cost_usd:.4f}"
        if self.model_calls is not None and calls >= self.model_calls:
            return f"{calls} model calls made of a budget of {self.model_calls}"
        return None


class _Outgoing(CamelModel):
    to: str | None = Field(default=None, max_length=500)
    message: str | None = Field(default=None, max_length=4000)
    channel: str | None = Field(default=None, max_length=100)


class ExternalWaitOptions(WaitOptions):
    """A wait for an event from outside (a person, a system): it may say which events it takes."""

    match: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="CEL over `event` (type, eventId, data), `waitingData` and the run's variables",
    )


class WaitForResponseParams(ExternalWaitOptions):
    kind = "response"
    expected_from: str | None = Field(default=None, max_length=200)
    thread_id: str | int | None = None


class RequestDocumentParams(ExternalWaitOptions, _Outgoing):
    kind = "document"
    documents: list[str] = Field(min_length=1, max_length=20)

    @field_validator("documents")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value) or not all(name.strip() for name in value):
            raise ValueError("document names must be distinct and non-empty")
        return value


class RequestSignatureParams(ExternalWaitOptions, _Outgoing):
    kind = "signature"
    document: str = Field(min_length=1, max_length=2000, description="URL (or template) of the document to sign")


class AssignTestParams(ExternalWaitOptions, _Outgoing):
    kind = "test"
    test: str = Field(min_length=1, max_length=200)


class WaitForEventParams(ExternalWaitOptions):
    kind = "event"
    event: str = Field(min_length=1, max_length=500, description="calendar event id (or template)")
    title: str | None = Field(default=None, max_length=500)


class TriggerAgentParams(WaitOptions):
    kind = "agent"
    agent: str = Field(pattern=f"^{AGENT_NAME_PATTERN}$")
    version: str | None = Field(default=None, max_length=50, description="a published workflow_version")
    input: dict[str, Any] = Field(default_factory=dict)
    wait_for_completion: bool = True
    on_child_failure: Literal["fail", "continue"] = "fail"


class DelayParams(CamelModel):
    duration: Duration | None = None
    until: str | None = Field(default=None, max_length=200, description="ISO 8601 time with zone, or a template")

    @model_validator(mode="after")
    def _one_of(self) -> DelayParams:
        if (self.duration is None) == (self.until is None):
            raise ValueError("give exactly one of duration or until")
        if self.duration is not None and self.duration > MAX_DELAY:
            raise ValueError(f"duration {format_duration(self.duration)} is above the maximum of 30d")
        if self.until is not None and "{{" not in self.until:
            parse_until(self.until)
        return self


def parse_until(text: str) -> datetime:
    """An absolute time with its zone (``2026-01-15T10:00:00Z``), or ValueError."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"until {text!r} is not an ISO 8601 time like 2026-01-15T10:00:00Z") from None
    if value.tzinfo is None:
        raise ValueError(f"until {text!r} has no time zone; add Z or +01:00")
    return value


class Transition(CamelModel):
    """One outgoing edge: taken when ``when`` (CEL) is true; the last one may omit it (default)."""

    when: str | None = Field(default=None, min_length=1, max_length=2000)
    to: str


CompensationKind = Literal["reversal", "annulment", "counter_operation", "noop"]
UnwindTrigger = Literal["failed", "cancelled", "timeout"]
UNWIND_TRIGGERS: tuple[UnwindTrigger, ...] = ("failed", "cancelled", "timeout")


class CompensationSpec(CamelModel):
    """How to undo a step that succeeded, if a later one fails (the seed's CompensableAction)."""

    action: str | None = Field(
        default=None, max_length=100, description="a registered action; default: the invoked action's own undo"
    )
    kind: CompensationKind = "reversal"
    when: str | None = Field(default=None, max_length=2000, description="CEL over `output`: is it compensatable?")


def _all_triggers() -> list[UnwindTrigger]:
    return list(UNWIND_TRIGGERS)


class CompensationPolicy(CamelModel):
    """When a run unwinds, and how a failed compensation is retried (the seed: 1, 2, 4, 8, 16 min)."""

    on: list[UnwindTrigger] = Field(default_factory=_all_triggers)
    max_retries: int = Field(default=5, ge=0, le=20)
    initial_interval: Duration = timedelta(minutes=1)
    backoff_coefficient: float = Field(default=2.0, ge=1.0, le=10.0)

    def delay(self, retry: int) -> timedelta:
        """Wait before retry number ``retry`` (1-based): 1, 2, 4, 8, 16 minutes by default."""
        return timedelta(seconds=self.initial_interval.total_seconds() * self.backoff_coefficient ** (retry - 1))


class _Node(CamelModel):
    next: str | None = None
    transitions: list[Transition] = Field(default_factory=list, max_length=50)
    description: str | None = Field(default=None, max_length=500)


class SendMessageNode(_Node):
    action_type: Literal["send_message"]
    parameters: SendMessageParams


class WaitForResponseNode(_Node):
    action_type: Literal["wait_for_response"]
    parameters: WaitForResponseParams = Field(default_factory=lambda: WaitForResponseParams.model_validate({}))


class RequestDocumentNode(_Node):
    action_type: Literal["request_document"]
    parameters: RequestDocumentParams


class RequestSignatureNode(_Node):
    action_type: Literal["request_signature"]
    parameters: RequestSignatureParams


class AssignTestNode(_Node):
    action_type: Literal["assign_test"]
    parameters: AssignTestParams


class WaitForEventNode(_Node):
    action_type: Literal["wait_for_event"]
    parameters: WaitForEventParams


class TriggerAgentNode(_Node):
    action_type: Literal["trigger_agent"]
    parameters: TriggerAgentParams


class DelayNode(_Node):
    action_type: Literal["delay"]
    parameters: DelayParams


class InvokeNode(_Node):
    """A side effect through a registered action (order, stock, payment...), idempotent by key."""

    action_type: Literal["invoke"]
    action: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    input: dict[str, Any] = Field(default_factory=dict)
    timeout: Duration = timedelta(seconds=30)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    compensate: CompensationSpec | None = None


class RunAgentNode(_Node):
    """A DSMO stage: a registered pure processor, artifact in -> artifact out + summary."""

    action_type: Literal["run_agent"]
    compensate: CompensationSpec | None = None
    agent: str = Field(min_length=1, max_length=100)
    agent_version: str | None = Field(default=None, max_length=50)
    input: str | None = Field(default=None, max_length=2000, description="template of the input artifact URI")
    output_schema: str | None = Field(default=None, max_length=100, description="a schema registered on the worker")
    timeout: Duration = timedelta(minutes=5)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    # At most so many of this stage's runs start per period, per key value (flow_control.Throttle).
    throttle: Throttle | None = None
    # Each attempt as a Temporal local activity (true) or a regular one (false); absent, the
    # definition's `localStages` decides (local_stages.py).
    local: bool | None = None


class LlmNode(_Node):
    """A stage answered by a chat model: prompts rendered from the run, the answer held to a schema.

    The endpoint and its key come from the worker's settings, never from the definition; `model`
    is a model name or one of the worker's aliases (`DSMO_LLM_MODELS`).
    """

    action_type: Literal["llm"]
    prompt: str = Field(min_length=1, max_length=20_000, description="template over the run's variables and `input`")
    system: str | None = Field(default=None, min_length=1, max_length=20_000, description="template, as `prompt`")
    model: str | None = Field(default=None, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=200_000)
    output_schema: dict[str, Any] | None = Field(default=None, description="JSON Schema the answer must match")
    summary: list[str] | None = Field(default=None, max_length=50, description="answer fields for the summary")
    retries: int = Field(default=1, ge=0, le=5, description="invalid answers re-asked with the validation error")
    input: str | None = Field(default=None, max_length=2000, description="template of the input artifact URI")
    timeout: Duration = timedelta(minutes=2)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    throttle: Throttle | None = None  # as a run_agent node's
    # The tools its model may call (tools.py): each answer with calls is a turn; the run makes them
    # and asks again, until an answer without calls (the node's output) or `max_turns`.
    tools: list[ToolSpec] | None = Field(default=None, min_length=1, max_length=32)
    max_turns: int = Field(default=8, ge=1, le=50, description="model answers at most, tool turns included")
    max_tool_calls: int = Field(default=8, ge=1, le=32, description="tool calls one answer may make")
    tool_timeout: Duration = timedelta(seconds=30)
    budget: Budget | None = None  # what one visit may spend over its turns (tools.py)
    on_budget: str | None = Field(default=None, description="where a visit that spent its budget goes")
    # How a call of a tool with `approval` waits for a person's decision (timeout, onTimeout).
    approval: ApprovalWait = Field(default_factory=lambda: ApprovalWait.model_validate({}))
    # Tools offered in a turn only while their condition holds (evaluated before each turn).
    allowed_tools: dict[str, str] | None = Field(default=None, max_length=32)
    # How long one visit's turns may take, time waiting for approvals left out.
    loop_timeout: Duration | None = None
    # Ask the model to stream its answer: the tokens go to the run's live stream as they arrive
    # (the recorded answer is the same either way).
    stream: bool = False

    @property
    def agent(self) -> str:
        """What the audit trail and the stage's records name as the agent."""
        return "llm"

    @property
    def agent_version(self) -> None:
        return None


# The nodes that run a stage (`stages.<node>` in templates and conditions).
StageNode = RunAgentNode | LlmNode

NODE_TYPES: tuple[type[_Node], ...] = (
    SendMessageNode,
    WaitForResponseNode,
    RequestDocumentNode,
    RequestSignatureNode,
    AssignTestNode,
    WaitForEventNode,
    TriggerAgentNode,
    DelayNode,
    RunAgentNode,
    InvokeNode,
    LlmNode,
)
ACTION_TYPES: tuple[str, ...] = tuple(
    node.model_fields["action_type"].annotation.__args__[0]  # type: ignore[union-attr]
    for node in NODE_TYPES
)
# The nodes that wait for an event from outside: the kinds of event a run's inbox may keep.
ExternalWaitNode = WaitForResponseNode | RequestDocumentNode | RequestSignatureNode | AssignTestNode | WaitForEventNode
