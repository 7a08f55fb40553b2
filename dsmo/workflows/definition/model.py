"""The agent definition: a versioned graph of nodes, loaded from YAML or JSON.

Field names follow the seed (camelCase in files, snake_case in Python). The graph is
checked when the definition is loaded, so a run never starts on a broken one.

Longer than most modules on purpose: the model, its canonical hash and the graph checks are
one unit (the checks read the model's private structure and the hash depends on both).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, ValidatorFunctionWrapHandler, model_validator

from dsmo.workflows.common.document_limits import DEFINITION_LIMITS, DocumentTooLarge, check_document
from dsmo.workflows.common.errors import DefinitionError, TemplateError
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN
from dsmo.workflows.common.templating import placeholders
from dsmo.workflows.common.wire import CamelModel
from dsmo.workflows.definition.conditions import BUILTIN_ROOTS, SEED_VARIABLES, ConditionError, check_condition
from dsmo.workflows.definition.flow_control import (
    ConcurrencyKey,
    Debounce,
    FlowControlError,
    Throttle,
    check_flow_control,
    check_start_template,
    check_throttle_period,
)
from dsmo.workflows.definition.node_types import (
    ACTION_TYPES,
    AssignTestNode,
    Budget,
    CompensationPolicy,
    DelayNode,
    InvokeNode,
    LlmNode,
    RequestDocumentNode,
    RequestSignatureNode,
    RunAgentNode,
    SendMessageNode,
    TriggerAgentNode,
    WaitForEventNode,
    WaitForResponseNode,
)
from dsmo.workflows.definition.retention import Retention
from dsmo.workflows.definition.sensitive import sensitive_problem
from dsmo.workflows.definition.tool_checks import check_tools_in_graph
from dsmo.workflows.definition.tools import check_json_schema, check_tools
from dsmo.workflows.events.inbox import InboxPolicy

NODE_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
# What a wait's `match` reads beside a condition's roots: the event, and what the wait itself says.
MATCH_ROOTS = ("event", "waitingData")
# Validation context key: set by parse_definition, where a definition is admitted (see check_graph).
ADMISSION = "dsmo.admission"

__all__ = [
    "ACTION_TYPES",
    "AgentDefinition",
    "Node",
    "RateLimit",
    "RunAgentNode",
    "WaitForResponseNode",
    "parse_definition",
]

Node = Annotated[
    SendMessageNode
    | WaitForResponseNode
    | RequestDocumentNode
    | RequestSignatureNode
    | AssignTestNode
    | WaitForEventNode
    | TriggerAgentNode
    | DelayNode
    | RunAgentNode
    | InvokeNode
    | LlmNode,
    Field(discriminator="action_type"),
]


class RateLimit(CamelModel):
    """Runs of this agent allowed at once; the others wait their turn in PENDING.

    Attributes:
        max_concurrent: How many runs may be past PENDING at the same time (1 to 10,000).
    """

    max_concurrent: int = Field(ge=1, le=10_000)


class AgentDefinition(CamelModel):
    """A versioned agent graph: its nodes, where it starts, and run-wide options.

    Load one with `load_definition`; `workflow_version` is the hash of its canonical form.

    Attributes:
        agent: The agent's name (lower case, digits and dashes).
        version: The author's version label.
        description: What the agent does, for people.
        start: The id of the first node.
        nodes: The nodes by id; each names its action type and its transitions.
        rate_limit: How many runs may be active at once, if limited.
        concurrency: Per-key limits: how many runs with the same key value (a conversation, a
            customer) may be past PENDING at once, and what a start for a busy key does.
        debounce: Starts for one key value close together become one run.
        throttle: At most so many starts per period for each key value; the rest wait in PENDING.
        config: Parameters conditions read as ``config.<key>``; part of the version.
        inputs: The input variables conditions may read; others are refused at validation.
        fail_safe: The node a run goes to on a contract violation (no route matched, bad output).
        audit_level: ``essential``, or ``extended`` to add each message sent and inference metadata.
        compensation: How the saga undoes completed actions when a later step fails.
        sensitive: Variables the audit trail keeps as fingerprints, not in the clear.
        inbox: How long and how many early events a run keeps for a wait ahead (default 7d, 20).
        subject: Whom the runs are about, rendered from the input at start (``{{applicant.id}}``):
            their stored data is sealed with that subject's key, and erasing the subject destroys it.
        retention: How long ended runs keep their data (``ended``) and their trail (``trail``).
        budget: What a run may spend on model calls (tokens, costUsd, modelCalls), checked before
            each one.
        on_budget: Where a run that spent its budget goes (default: the fail-safe route).
        local_stages: Which `run_agent` stages run as Temporal local activities (inside the
            workflow's task, no server round trip per attempt): ``auto`` (default) those with a
            timeout of at most 10 s, ``always``, or ``never``; a node's ``local`` overrides it.
    """

    agent: str = Field(pattern=f"^{AGENT_NAME_PATTERN}$")
    version: str = Field(default="1.0.0", min_length=1, max_length=50)
    description: str | None = Field(default=None, max_length=2000)
    start: str
    nodes: dict[Annotated[str, Field(pattern=NODE_ID_PATTERN)], Node] = Field(min_length=1, max_length=500)
    rate_limit: RateLimit | None = None
    concurrency: list[ConcurrencyKey] | None = Field(default=None, min_length=1, max_length=5)
    debounce: Debounce | None = None
    throttle: Throttle | None = None
    # Parameters conditions read as `config.<key>` (thresholds, enabled routes...); part of the version.
    config: dict[str, Any] = Field(default_factory=dict)
    # Run input variables conditions may read; anything else is refused when the definition is checked.
    inputs: list[str] = Field(default_factory=list, max_length=200)
    # Where a run goes on a contract violation (no route matched, bad output, version mismatch).
    fail_safe: str | None = None
    audit_level: Literal["essential", "extended"] = "essential"
    compensation: CompensationPolicy = Field(default_factory=CompensationPolicy)
    # Values the audit trail keeps as a fingerprint, not in the clear (workflows/definition/sensitive.py).
    # None when absent, so definitions without it keep their workflow_version.
    sensitive: list[str] | None = Field(default=None, max_length=100)
    # None when absent (the defaults apply), so definitions without it keep their workflow_version.
    inbox: InboxPolicy | None = None
    # The data subject (workflows/definition/subjects.py). None when absent: definitions without
    # it keep their workflow_version.
    subject: str | None = Field(default=None, min_length=1, max_length=200)
    # How long ended runs keep their data and trail (workflows/definition/retention.py). None when
    # absent: definitions without it keep their workflow_version.
    retention: Retention | None = None
    # What a run may spend on model calls over all its `llm` stages, and where it goes once it
    # has (else the fail-safe route). None when absent: definitions without it keep their version.
    budget: Budget | None = None
    on_budget: str | None = None
    # How `run_agent` stages run: `auto` (when absent) makes those with a timeout of 10 s or less
    # local activities, `always` and `never` decide for all; a node's `local` decides for itself.
    local_stages: Literal["auto", "always", "never"] | None = None

    @model_validator(mode="after")
    def _check_graph(self, info: ValidationInfo) -> AgentDefinition:
        check_graph(self, admitting=bool(info.context and info.context.get(ADMISSION)))
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _reuse_decoded(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        # Wraps the whole validation, graph check included. Admission always validates in full.
        if info.context and info.context.get(ADMISSION):
            return handler(data)
        if isinstance(data, cls):  # validated when it was made, and frozen: nothing to check again
            return data
        return _DECODED.get_or_validate(data, handler)

    @functools.cached_property
    def workflow_version(self) -> str:
        """Short hash of the canonical definition: equal graphs, equal versions.

        Computed once per instance (the model is frozen, so it cannot go stale)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> AgentDefinition:
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied.__dict__.pop("workflow_version", None)  # another graph: hash it again
        return copied

    def canonical_json(self) -> str:
        """The definition as compact JSON with sorted keys, the input of its ``workflow_version``.

        Returns:
            The same text for any two definitions that mean the same, whatever their key order.
        """
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        for node in data["nodes"].values():
            _leave_out_later_defaults(node)
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# Node fields added after definitions were published, left out of the canonical form while they
# hold their default: a definition written before them keeps its workflow_version (a new hash
# would give its running runs new idempotency keys and artifact folders). Per action type: the
# fields always left out at their default, and those left out only on a node without tools.
_LATER_DEFAULTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llm": (
        {
            "approval": {"maxRetries": 1, "onTimeout": "continue", "timeout": "3d", "timeoutActions": []},
            "stream": False,
        },
        {"maxTurns": 8, "maxToolCalls": 8, "toolTimeout": "30s"},
    ),
}


def _leave_out_later_defaults(node: dict[str, Any]) -> None:
    always, without_tools = _LATER_DEFAULTS.get(node.get("actionType", ""), ({}, {}))
    for field, default in (always | ({} if node.get("tools") else without_tools)).items():
        if node.get(field) == default:
            del node[field]


class DecodedDefinitions:
    """The definitions a process has decoded, by content: each run carries its definition in its
    request, and a worker decodes it at every run start and every replay of an evicted run.

    Validation is a pure function of the document and the model is frozen, so handing every run
    of a version the same instance changes nothing they can observe; it skips revalidating and
    re-checking the graph (~30 us per node) and rehashing the version. Documents that do not
    validate are not kept. The SDK decodes on several workflow-task threads: each operation on the
    OrderedDict is atomic, and two threads decoding the same new version at once both validate
    it, which costs time, not correctness.
    """

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[str, AgentDefinition] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_validate(self, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        try:
            # The document as it came, keys in its order: only the same document shares an instance.
            key = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):  # built from Python objects, not decoded: nothing to share
            return handler(data)
        found = self._items.get(key)
        if found is not None:
            return found
        decoded = handler(data)
        if len(self._items) >= self.max_entries:
            with contextlib.suppress(KeyError):  # KeyError: another thread emptied it meanwhile
                self._items.popitem(last=False)  # the oldest: versions come and go
        self._items[key] = decoded
        return decoded


_DECODED = DecodedDefinitions()


def node_templates(node: Any) -> list[tuple[str, str]]:
    """Every string in a node's parameters (templates may appear in any of them)."""
    found: list[tuple[str, str]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, str):
            found.append((path, value))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}.{index}")

    data = node.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(node, LlmNode):
        found.extend((field, data[field]) for field in ("prompt", "system") if field in data)
    walk(data.get("parameters", {}), "parameters")
    if "input" in data and isinstance(data["input"], str):
        found.append(("input", data["input"]))
    elif "input" in data:
        walk(data["input"], "input")
    return found


def effective_parameters(definition: AgentDefinition) -> dict[str, Any]:
    """What the config snapshot records besides the definition: the values a run will use."""
    nodes: dict[str, Any] = {}
    for node_id, node in definition.nodes.items():
        entry: dict[str, Any] = {"actionType": node.action_type}
        if getattr(node, "compensate", None) is not None:
            entry["compensate"] = node.compensate.model_dump(mode="json", by_alias=True)  # type: ignore[union-attr]
        if isinstance(node, RunAgentNode):
            entry.update(
                agent=node.agent,
                agentVersion=node.agent_version,
                timeout=node.timeout.total_seconds(),
                retry=node.retry.model_dump(mode="json", by_alias=True),
                outputSchema=node.output_schema,
            )
        elif isinstance(node, LlmNode):
            entry.update(
                model=node.model,
                temperature=node.temperature,
                maxTokens=node.max_tokens,
                retries=node.retries,
                timeout=node.timeout.total_seconds(),
                retry=node.retry.model_dump(mode="json", by_alias=True),
            )
        params: Any = getattr(node, "parameters", None)
        timeout = getattr(params, "timeout", None)
        if timeout is not None:
            entry.update(
                timeoutSeconds=timeout.total_seconds(), onTimeout=params.on_timeout, maxRetries=params.max_retries
            )
        entry["routes"] = [t.to for t in node.transitions] if node.transitions else ([node.next] if node.next else [])
        nodes[node_id] = entry
    return {
        "thresholds": definition.config,
        "failSafe": definition.fail_safe,
        "auditLevel": definition.audit_level,
        "rateLimit": definition.rate_limit.model_dump(mode="json", by_alias=True) if definition.rate_limit else None,
        "compensation": definition.compensation.model_dump(mode="json", by_alias=True),
        "nodes": nodes,
        # Only when set: a version's snapshot is written once, and older ones lack the keys.
        **(
            {"concurrency": [entry.model_dump(mode="json", by_alias=True) for entry in definition.concurrency]}
            if definition.concurrency
            else {}
        ),
        **({"debounce": definition.debounce.model_dump(mode="json", by_alias=True)} if definition.debounce else {}),
        **({"throttle": definition.throttle.model_dump(mode="json", by_alias=True)} if definition.throttle else {}),
    }


def check_graph(definition: AgentDefinition, *, admitting: bool = True) -> None:
    """The paper's static checks; each error names the node (raised as '@field: reason').

    Checks added after runs may have started (unknown functions, template variables) apply only
    when ``admitting`` a definition (`parse_definition`: files, publish, the ingress), not when a
    running workflow decodes the definition it is pinned to: a run admitted under older checks
    must keep decoding, and so keep replaying.
    """
    nodes = definition.nodes
    known = ", ".join(sorted(nodes))
    if definition.start not in nodes:
        raise ValueError(f"@start: unknown node {definition.start!r} (nodes: {known})")
    for field, target in (("failSafe", definition.fail_safe), ("onBudget", definition.on_budget)):
        if target is not None and target not in nodes:
            raise ValueError(f"@{field}: unknown node {target!r} (nodes: {known})")
    stages = [node_id for node_id, node in nodes.items() if isinstance(node, RunAgentNode | LlmNode)]
    _check_flow(definition)
    for index, entry in enumerate(definition.sensitive or ()):
        problem = sensitive_problem(entry, stages)
        if problem:
            raise ValueError(f"@sensitive.{index}: {problem}")
    for node_id, node in nodes.items():
        _check_links(node_id, node, nodes, known)
        _check_node_throttle(node_id, node)
        for index, transition in enumerate(node.transitions):
            if transition.when is None:
                continue
            try:
                check_condition(
                    transition.when,
                    inputs=definition.inputs,
                    stages=stages,
                    config_keys=definition.config.keys(),
                    check_functions=admitting,
                )
            except ConditionError as err:
                raise ValueError(f"@nodes.{node_id}.transitions.{index}.when: {err}") from None
        spec = getattr(node, "compensate", None)
        if spec is not None and spec.when is not None:
            try:
                check_condition(
                    spec.when,
                    inputs=["output"],
                    stages=stages,
                    config_keys=definition.config.keys(),
                    check_functions=admitting,
                )
            except ConditionError as err:
                raise ValueError(f"@nodes.{node_id}.compensate.when: {err}") from None
            if spec.action is None and not isinstance(node, InvokeNode):
                raise ValueError(f"@nodes.{node_id}.compensate.action: required for a {node.action_type} node")
        elif spec is not None and spec.action is None and not isinstance(node, InvokeNode):
            raise ValueError(f"@nodes.{node_id}.compensate.action: required for a {node.action_type} node")
        for field, template in node_templates(node):
            try:
                paths = placeholders(template)
            except TemplateError as err:
                raise ValueError(f"@nodes.{node_id}.{field}: {err}") from None
            for path in paths if admitting else ():
                if isinstance(node, LlmNode) and path.split(".", 1)[0].split("[", 1)[0] == "input":
                    continue  # the stage's input document, known only when the stage runs
                problem = _unknown_variable(path, definition, stages)
                if problem:
                    raise ValueError(f"@nodes.{node_id}.{field}: {problem}")
        if isinstance(node, LlmNode) and admitting:
            _check_llm(node_id, node)
        match = getattr(getattr(node, "parameters", None), "match", None)
        if match is not None:
            try:
                check_condition(
                    match,
                    inputs=[*definition.inputs, *MATCH_ROOTS],
                    stages=stages,
                    config_keys=definition.config.keys(),
                    check_functions=admitting,
                )
            except ConditionError as err:
                raise ValueError(f"@nodes.{node_id}.parameters.match: {err}") from None
        if isinstance(node, LlmNode):
            check_tools_in_graph(
                definition.nodes,
                node_id,
                node,
                inputs=definition.inputs,
                stages=stages,
                config_keys=list(definition.config),
                admitting=admitting,
            )
    _check_reachability(definition)


def _check_llm(node_id: str, node: LlmNode) -> None:
    """An `llm` node's answer schema and tools' argument schemas compile, and its summary fields
    are ones the answer schema has."""
    check_tools(node_id, node.tools or [])
    if not node.tools and (node.budget is not None or node.on_budget is not None):
        field = "budget" if node.budget is not None else "onBudget"
        raise ValueError(f"@nodes.{node_id}.{field}: a budget bounds the turns of a node with tools; this one has none")
    if not node.tools and "approval" in node.model_fields_set:
        raise ValueError(f"@nodes.{node_id}.approval: it says how tool calls wait for a person; this node has no tools")
    if node.output_schema is None:
        if node.summary is not None and set(node.summary) - {"text"}:
            raise ValueError(f"@nodes.{node_id}.summary: a plain-text answer has one field, text (add outputSchema)")
        return
    check_json_schema(f"@nodes.{node_id}.outputSchema", node.output_schema)
    properties = node.output_schema.get("properties")
    if node.summary is not None and isinstance(properties, dict):
        unknown = [name for name in node.summary if name not in properties]
        if unknown:
            raise ValueError(
                f"@nodes.{node_id}.summary: {unknown[0]!r} is not a property of outputSchema "
                f"({', '.join(properties) or 'none'})"
            )


def _unknown_variable(path: str, definition: AgentDefinition, stages: list[str]) -> str | None:
    """Why a template's variable can never exist, or None.

    Stage and step references are always checkable; other roots only once the definition
    declares its run `inputs` (as for conditions), since undeclared inputs could be anything.
    """
    root, _, rest = path.partition(".")
    root = root.split("[", 1)[0]
    member = rest.split(".", 1)[0].split("[", 1)[0]
    if root == "stages" and member and member not in stages:
        return f"refers to unknown stage {member!r} (stages: {', '.join(sorted(stages)) or 'none'})"
    if root in ("run", "config") and root not in definition.inputs:
        return f"refers to {root!r}, which conditions read but templates cannot (they read the run's variables)"
    steps = sorted(node_id for node_id, node in definition.nodes.items() if isinstance(node, InvokeNode))
    if root == "steps" and member and member not in steps:
        return f"refers to unknown step {member!r} (invoke steps: {', '.join(steps) or 'none'})"
    known = {*BUILTIN_ROOTS, "steps", *SEED_VARIABLES, *definition.inputs}
    if definition.inputs and root not in known:
        return (
            f"refers to unknown variable {root!r} (run inputs: {', '.join(definition.inputs)}; "
            "also stages, steps, run, config and the seed's variables)"
        )
    return None


def _check_flow(definition: AgentDefinition) -> None:
    try:
        check_flow_control(definition.concurrency, definition.inputs, definition.debounce, definition.throttle)
        if definition.subject is not None:
            check_start_template("subject", definition.subject, definition.inputs)
            if definition.debounce is not None:
                # A batch's run gathers several starts' inputs: no one input names its subject.
                raise FlowControlError("@subject: a debounced definition cannot name a data subject")
    except FlowControlError as err:
        raise ValueError(str(err)) from None


def _check_node_throttle(node_id: str, node: Any) -> None:
    throttle = getattr(node, "throttle", None)
    if throttle is None:
        return
    try:
        check_throttle_period(f"nodes.{node_id}.throttle", throttle)
        placeholders(throttle.key or "")
    except FlowControlError as err:
        raise ValueError(str(err)) from None
    except TemplateError as err:
        raise ValueError(f"@nodes.{node_id}.throttle.key: {err}") from None


def _check_links(node_id: str, node: Any, nodes: dict[str, Any], known: str) -> None:
    if node.next is not None and node.transitions:
        raise ValueError(f"@nodes.{node_id}.transitions: give either next or transitions, not both")
    if node.next is not None and node.next not in nodes:
        raise ValueError(f"@nodes.{node_id}.next: unknown node {node.next!r} (nodes: {known})")
    on_budget = getattr(node, "on_budget", None)
    if on_budget is not None and on_budget not in nodes:
        raise ValueError(f"@nodes.{node_id}.onBudget: unknown node {on_budget!r} (nodes: {known})")
    seen_conditions: set[str] = set()
    for index, transition in enumerate(node.transitions):
        where = f"@nodes.{node_id}.transitions.{index}"
        if transition.to not in nodes:
            raise ValueError(f"{where}.to: unknown node {transition.to!r} (nodes: {known})")
        if transition.when is None and index != len(node.transitions) - 1:
            raise ValueError(
                f"{where}.when: only the last transition may omit `when` (the ones after it could never be taken)"
            )
        if transition.when is not None:
            normalized = " ".join(transition.when.split())
            if normalized in seen_conditions:
                raise ValueError(f"{where}.when: same condition as an earlier transition (ambiguous ordering)")
            seen_conditions.add(normalized)


def successors(node: Any) -> list[str]:
    """The nodes a node may go to next (its `next`, or every transition's target; for a tool-using
    `llm` node also the nodes its tools run, and where it goes when it has spent its budget)."""
    found = [node.next] if node.next is not None else [transition.to for transition in node.transitions]
    tool_nodes = [tool.node for tool in getattr(node, "tools", None) or [] if tool.node is not None]
    on_budget = getattr(node, "on_budget", None)
    more = [target for target in (*tool_nodes, on_budget) if target is not None]
    return [*found, *(target for target in dict.fromkeys(more) if target not in found)]


def _check_reachability(definition: AgentDefinition) -> None:
    nodes = definition.nodes
    roots = [definition.start] + [root for root in (definition.fail_safe, definition.on_budget) if root]
    reached: set[str] = set()
    pending = list(roots)
    while pending:
        current = pending.pop()
        if current not in reached:
            reached.add(current)
            pending.extend(successors(nodes[current]))
    unreachable = sorted(set(nodes) - reached)
    if unreachable:
        raise ValueError(f"@nodes.{unreachable[0]}: unreachable from start {definition.start!r}")
    # Every node must be able to reach an end (a node with no way out), or runs could never finish.
    ends = {node_id for node_id, node in nodes.items() if not successors(node)}
    can_end = set(ends)
    changed = True
    while changed:
        changed = False
        for node_id, node in nodes.items():
            if node_id not in can_end and any(target in can_end for target in successors(node)):
                can_end.add(node_id)
                changed = True
    stuck = sorted(set(nodes) - can_end)
    if stuck:
        raise ValueError(f"@nodes.{stuck[0]}: no path to an end node (a cycle with no exit)")


def parse_definition(data: Any, *, source: str | None = None) -> AgentDefinition:
    """Validate already-parsed YAML/JSON into a definition, or raise one DefinitionError."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise DefinitionError(
            "",
            "a definition is a mapping with agent, start and nodes, not "
            + ("an empty document" if data is None else type(data).__name__),
            source=source,
        )
    try:
        check_document(data, field="definition", limits=DEFINITION_LIMITS)
    except DocumentTooLarge as err:
        field, _, reason = str(err).partition(": ")
        raise DefinitionError(field.removeprefix("definition").lstrip("."), reason, source=source) from None
    try:
        return AgentDefinition.model_validate(data, context={ADMISSION: True})
    except ValidationError as err:
        raise _first_error(err, source) from None


def _first_error(err: Any, source: str | None) -> DefinitionError:
    errors = err.errors(include_url=False)
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    if message.startswith("@"):
        field, _, reason = message[1:].partition(": ")
        return DefinitionError(field, reason + more, source=source)
    # Drop the union tag pydantic adds to the path (nodes.x.send_message.parameters -> nodes.x.parameters).
    loc = [str(part) for part in first["loc"] if part not in ACTION_TYPES]
    if loc and loc[-1] == "[key]":
        return DefinitionError(
            ".".join(loc[:-1]), f"invalid node id {first['input']!r}: {message}{more}", source=source
        )
    field = ".".join(loc)
    if first["type"] == "union_tag_invalid":
        tag = first.get("ctx", {}).get("tag")
        field = f"{field}.actionType" if field else "actionType"
        message = f"unknown action {tag!r} (expected one of: {', '.join(ACTION_TYPES)})"
    elif first["type"] == "union_tag_not_found":
        field = f"{field}.actionType" if field else "actionType"
        message = "is required"
    elif first["type"] == "missing":
        message = "is required"
    elif first["type"] == "extra_forbidden":
        message = "is not a known field"
    return DefinitionError(field, message + more, source=source)
