"""What a chat model's reply means for an `llm` stage: its text, whether it fits the node's schema,
the stage's summary and the tokens it cost. Pure functions; the calls are made in `llm_stage`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsmo.activities.json_values import json_problem
from dsmo.activities.plugin_errors import ContractViolation, InvalidInput
from dsmo.workflows.common.errors import DsmoError

TRANSIENT_STATUS = frozenset({408, 409, 429})
SUMMARY_TEXT_MAX = 200  # a string answer field longer than this stays out of the default summary


class LlmUnavailable(DsmoError):
    """The endpoint is down, rate-limited or failing (transient: the stage is retried)."""

    code = "llm_unavailable"


NOT_UNICODE = "it is not valid Unicode (a lone surrogate: \\ud800-\\udfff unpaired)"


def content_of(status: int | None, body: str, error: str | None) -> tuple[str, dict[str, Any]]:
    """The answer's text and the whole reply of a call that got ``status`` and ``body`` (or ``error``).

    Raises:
        LlmUnavailable: No answer, a transient status, or a body that is no chat completion.
        InvalidInput: The endpoint refused the request (another 4xx).
    """
    if error is not None or status is None:
        raise LlmUnavailable(f"llm endpoint did not answer: {error}")
    if status in TRANSIENT_STATUS or status >= 500:
        raise LlmUnavailable(f"llm endpoint answered {status}: {body[:200]}")
    if status >= 400:
        raise InvalidInput(f"llm endpoint refused the request ({status}): {body[:200]}")
    try:
        reply = json.loads(body)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise LlmUnavailable(f"llm endpoint answered {status} without a chat completion: {body[:200]}") from None
    if not isinstance(content, str):
        raise LlmUnavailable("llm endpoint answered a chat completion without text content")
    return content, reply


def check_answer(content: str, schema: Any) -> tuple[str | None, dict[str, Any]]:
    """(None, answer) when ``content`` is a JSON object matching ``schema``, else (the problem, {})."""
    try:
        parsed = json.loads(content)
    except json.JSONDecodeError as err:
        return f"it is not JSON ({err.msg} at character {err.pos})", {}
    except RecursionError:
        return "it is nested too deep", {}
    if not isinstance(parsed, dict):
        return f"it is a JSON {type(parsed).__name__}, not an object", {}
    problem = json_problem(parsed, what="answer")
    if problem is not None:
        return problem, {}
    try:
        schema.check(parsed, agent="llm", what="answer")
    except ContractViolation as err:
        return str(err).removeprefix("agent llm: "), {}
    return None, parsed


def judge(
    status: int | None, body: str, error: str | None, schema: Any
) -> tuple[str, dict[str, Any], str | None, dict[str, Any]]:
    """(content, reply, problem, answer) of one call; the problem is None when the answer is taken.

    Raises:
        LlmUnavailable: No answer, a transient status, or a body that is no chat completion.
        InvalidInput: The endpoint refused the request (another 4xx).
    """
    content, reply = content_of(status, body, error)
    content, valid = valid_text(content)
    if not valid:  # asked again, with the reason, like any invalid answer
        return content, reply, NOT_UNICODE, {}
    if schema is None:
        return content, reply, None, {"text": content}
    problem, answer = check_answer(content, schema)
    return content, reply, problem, answer


def valid_text(text: str) -> tuple[str, bool]:
    """(``text``, True) when it can be stored as UTF-8; else (it with each lone surrogate, which a
    JSON ``\\ud800`` escape can smuggle in, made U+FFFD, False)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="surrogatepass").decode(errors="replace"), False
    return text, True


def answer_summary(answer: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """The stage's summary: the node's ``summaryFields``, else the answer's short scalar fields."""
    if fields is not None:
        return {name: answer.get(name) for name in fields}
    return {
        name: value
        for name, value in answer.items()
        if value is None
        or isinstance(value, bool | int | float)
        or (isinstance(value, str) and len(value) <= SUMMARY_TEXT_MAX)
    }


def add_usage(usage: dict[str, int], reply: dict[str, Any]) -> None:
    """Add one reply's token counts to the stage's (a repaired answer costs every call's tokens)."""
    counted = reply.get("usage")
    if isinstance(counted, dict):
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if isinstance(counted.get(name), int):
                usage[name] = usage.get(name, 0) + counted[name]


def cost_usd(prices: Mapping[str, tuple[float, float]], model: str, usage: Mapping[str, int]) -> float | None:
    """What the calls' tokens cost at ``model``'s price (USD per million tokens), or None when the
    price table does not name the model."""
    price = prices.get(model)
    if price is None:
        return None
    spent = usage.get("prompt_tokens", 0) * price[0] + usage.get("completion_tokens", 0) * price[1]
    return round(spent / 1_000_000, 8)
