"""What a tool-using `llm` stage sends and takes: the conversation so far as chat messages, and
the tool calls of a model's answer, each checked against the node's tools.

Pure functions over documents already read; `llm_stage` makes the calls and reads the store.
A call the run cannot make (an unknown tool, arguments that are not a JSON object or break the
tool's schema) is not an error of the stage: it is refused with its reason, and the reason goes
back to the model as that call's result, so the model can correct itself within `maxTurns`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dsmo.activities.artifacts import encode_json
from dsmo.activities.contract_schemas import ContractSchema, compiled_schema
from dsmo.activities.json_values import json_problem
from dsmo.activities.llm_answers import NOT_UNICODE, check_answer, content_of, judge, valid_text
from dsmo.activities.plugin_errors import ContractViolation
from dsmo.workflows.contracts.llm_call import LlmCall
from dsmo.workflows.contracts.tool_io import TOOL_TURN
from dsmo.workflows.definition.conditions import ConditionError, ConditionScope, condition_references

ARGUMENTS_MAX_BYTES = 64 * 1024  # one call's arguments; past this the call is refused
CALL_ID_MAX = 64
REASON_MAX = 1000  # bytes of the model's words beside calls that wait for approval, as a person sees them
# Bytes of arguments the summary of one answer carries for its shown calls (and its words after
# them): with the calls' ids and names, under the stage's 4,096-byte summary cap.
SHOWN_MAX_BYTES = 2048


def turn_of(status: int | None, body: str, error: str | None) -> tuple[str | None, list[Any], dict[str, Any]]:
    """(content, raw tool calls, reply) of one call's answer.

    Raises:
        LlmUnavailable: No answer, a transient status, or a body that is no chat completion.
        InvalidInput: The endpoint refused the request (another 4xx).
    """
    try:
        message = json.loads(body)["choices"][0]["message"] if error is None and status == 200 else None
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        message = None
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if isinstance(calls, list) and calls:
        content = message.get("content") if isinstance(message, dict) else None
        return (content if isinstance(content, str) else None), calls, json.loads(body)
    text, reply = content_of(status, body, error)  # no tool call: an answer as any `llm` stage's
    return text, [], reply


def checked_calls(calls: list[Any], tools: dict[str, ContractSchema], max_calls: int) -> list[dict[str, Any]]:
    """Each call as the run records it: ``id``, ``name``, ``arguments`` and, if refused, ``problem``.

    Raises:
        ContractViolation: More calls than ``max_calls`` in one answer (nothing is run).
    """
    if len(calls) > max_calls:
        raise ContractViolation(f"llm: the answer made {len(calls)} tool calls; at most {max_calls} (maxToolCalls)")
    checked = []
    for index, raw in enumerate(calls, 1):
        function = raw.get("function") if isinstance(raw, dict) else None
        call_id = str(raw.get("id") or f"call-{index}")[:CALL_ID_MAX] if isinstance(raw, dict) else f"call-{index}"
        name = str(function.get("name", ""))[:CALL_ID_MAX] if isinstance(function, dict) else ""
        call_id, name = valid_text(call_id)[0], valid_text(name)[0]  # stored and sent back as UTF-8
        arguments, problem = _arguments(function.get("arguments") if isinstance(function, dict) else None)
        if name not in tools:
            problem = f"there is no tool {name!r}; the tools are {', '.join(sorted(tools))}"
        elif problem is None:
            try:
                tools[name].check(arguments, agent="llm", what=f"tool {name} arguments")
            except ContractViolation as err:
                problem = str(err).removeprefix("agent llm: ")
        checked.append(
            {"id": call_id, "name": name, "arguments": arguments if problem is None else {}}
            # A refused call keeps why, and what the model sent: the audit reads it, and the model
            # reads its call as it made it before the reason.
            | ({"problem": problem, "asked": _asked(_sent(function))} if problem else {})
        )
    return checked


def _sent(function: Any) -> Any:
    """A call's arguments as the model sent them (text, or whatever else it put there)."""
    return function.get("arguments") if isinstance(function, dict) else None


def _asked(raw: Any) -> str:
    """What a refused call's arguments were, as text: whole, but for arguments past
    `ARGUMENTS_MAX_BYTES` (refused for their size), their first `ARGUMENTS_MAX_BYTES` bytes."""
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str, ensure_ascii=False)
    return valid_text(text)[0].encode()[:ARGUMENTS_MAX_BYTES].decode(errors="ignore")


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A call's arguments as a JSON object, or why they are not one."""
    if isinstance(raw, str):
        if len(raw.encode()) > ARGUMENTS_MAX_BYTES:
            return {}, f"the arguments are {len(raw.encode()):,} bytes; at most {ARGUMENTS_MAX_BYTES:,}"
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            return {}, "the arguments are not JSON"
    if not isinstance(raw, dict):
        return {}, "the arguments are not a JSON object"
    problem = json_problem(raw, what="arguments")
    return (raw, None) if problem is None else ({}, problem)


def tool_turn_output(
    content: str | None,
    calls: list[dict[str, Any]],
    shown: Collection[str] = (),
    conditions: Mapping[str, str] | None = None,
    sent: Sequence[Any] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(document, summary) of an answer that called tools.

    The document is the assistant's message as the run keeps it; the summary, what the workflow
    needs to make the calls (ids, names, which were refused), small whatever the arguments, except
    for accepted calls of the ``shown`` tools (those that may wait for approval, or that a node of
    the graph makes): they carry their arguments, and the summary the model's words (``reason``),
    all within `SHOWN_MAX_BYTES`. A shown call whose arguments do not fit is refused, with the
    reason the model reads, so the turn's summary stays under the stage's summary cap.

    Args:
        content: The model's words beside its calls.
        calls: The calls as `checked_calls` made them.
        shown: The tools whose calls are shown.
        conditions: The approval conditions of the ``shown`` tools whose calls wait only where
            theirs holds: a call that `waits` for no one is not shown (``waits: false`` instead).
        sent: Each call's arguments as the model sent them, kept as what a call refused here asked.
    """
    entries = [{"id": call["id"], "name": call["name"], "ok": "problem" not in call} for call in calls]
    room = SHOWN_MAX_BYTES
    for index, (call, entry) in enumerate(zip(calls, entries, strict=True)):
        if not (entry["ok"] and call["name"] in shown):
            continue
        condition = (conditions or {}).get(call["name"])
        if condition is not None and not waits(condition, call["arguments"]):
            entry["waits"] = False  # the run makes it without reading its arguments
            continue
        size = len(encode_json(call["arguments"]))
        if size > room:
            call["problem"] = (
                f"the arguments are {size:,} bytes; the calls of one answer that wait for a person or run a node "
                f"of the graph carry at most {SHOWN_MAX_BYTES:,} bytes of arguments together"
            )
            asked = sent[index] if index < len(sent) else call["arguments"]
            call["asked"], call["arguments"], entry["ok"] = _asked(asked), {}, False
            continue
        entry["arguments"], room = call["arguments"], room - size
    summary: dict[str, Any] = {"turn": TOOL_TURN, "toolCalls": entries}
    if content and any("arguments" in entry for entry in entries):
        summary["reason"] = content.encode()[: min(REASON_MAX, max(room, 0))].decode(errors="ignore")
    return {"content": content, "toolCalls": calls}, summary


def waits(condition: str, arguments: dict[str, Any]) -> bool:
    """Whether a call whose tool's approval is ``condition`` may wait for a person: False only
    when the condition reads nothing but the call's arguments (``args``) and does not hold over
    them, which the run, evaluating it again, finds the same whatever else it knows."""
    try:
        roots, _ = condition_references(condition)
        return bool(roots - {"args"}) or ConditionScope({}).evaluate(condition, {"args": arguments})
    except ConditionError:  # the run cannot evaluate it either: a person decides
        return True


def conversation_messages(turns: list[tuple[dict[str, Any], list[dict[str, Any] | None]]]) -> list[dict[str, Any]]:
    """The chat messages of earlier turns: each answer with its calls, then each call's result.

    Args:
        turns: Per turn, its answer document (`tool_turn_output`) and, per call, its record
            (None for a call the run refused: its problem is the result the model sees).
    """
    messages: list[dict[str, Any]] = []
    for answer, records in turns:
        calls = answer.get("toolCalls", [])
        messages.append(
            {
                "role": "assistant",
                "content": answer.get("content"),
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": _arguments_text(call)},
                    }
                    for call in calls
                ],
            }
        )
        for call, record in zip(calls, records, strict=True):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": _result_text(call, record)})
    return messages


def _arguments_text(call: dict[str, Any]) -> str:
    """A call's arguments as the conversation shows them: a refused call's as the model sent them
    (the reason it reads next is about those), an accepted call's as the run took them."""
    asked = call.get("asked")
    if "problem" in call and isinstance(asked, str):
        return asked
    return json.dumps(call.get("arguments", {}))


def _result_text(call: dict[str, Any], record: dict[str, Any] | None) -> str:
    """What the model reads as a call's result: the action's output, or the error in one line."""
    if record is None:
        return f"error: {call.get('problem', 'refused')}"
    if record.get("error") is not None:
        return f"error: {record['error']}"
    output = json.dumps(record.get("output"), ensure_ascii=False, sort_keys=True)
    decided = record.get("decision") or {}
    if decided.get("decision") == "edit":  # the model learns its call was not made as it asked
        arguments = json.dumps(record.get("arguments"), ensure_ascii=False, sort_keys=True)
        return f"(a person changed the arguments to {arguments}) {output}"
    return output


def judged(
    status: int | None, body: str, error: str | None, schema: ContractSchema | None, call: LlmCall
) -> tuple[str, dict[str, Any], str | None, dict[str, Any], dict[str, Any] | None]:
    """(content, reply, problem, answer, turn) of one call; ``turn`` is the summary of an answer
    that called tools (its calls checked against the node's tools), None for a final answer.

    Raises:
        LlmUnavailable: No answer, a transient status, or a body that is no chat completion.
        InvalidInput: The endpoint refused the request (another 4xx).
        ContractViolation: An answer with more tool calls than the node allows.
    """
    if call.tools is None:
        return (*judge(status, body, error, schema), None)
    content, calls, reply = turn_of(status, body, error)
    content, valid = valid_text(content) if content is not None else (None, True)
    if calls:
        tools = {
            tool["function"]["name"]: compiled_schema(encode_json(tool["function"]["parameters"]))
            for tool in call.tools
        }
        checked = checked_calls(calls, tools, call.max_tool_calls)
        sent = [_sent(raw.get("function") if isinstance(raw, dict) else None) for raw in calls]
        document, turn = tool_turn_output(content, checked, call.shown_calls, call.approval_conditions, sent)
        return content or "", reply, None, document, turn
    text = content or ""
    if not valid:  # asked again, with the reason, like any invalid answer
        return text, reply, NOT_UNICODE, {}, None
    if schema is None:
        return text, reply, None, {"text": text}, None
    problem, answer = check_answer(text, schema)
    return text, reply, problem, answer, None
