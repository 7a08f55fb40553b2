"""The JSON bodies the ingress accepts, validated by pydantic before any route runs.

Before a body is parsed its text is read once for what Python's parser would take or choke on
but JSON has no room for (`StrictJsonRoute`): nesting deeper than `MAX_JSON_DEPTH`, `NaN` and
`Infinity`, numbers a 64-bit float cannot hold (`1e400`) and integers longer than Python reads.
Each is refused with 400 `invalid_json` naming where it is, before the parser recurses into it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from dsmo.server.ingress.problems import Problem
from dsmo.workflows.common.identifiers import (
    AGENT_NAME_PATTERN,
    MAX_EVENT_ID,
    RUN_ID_PATTERN,
)
from dsmo.workflows.common.wire import to_camel


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class EventRequest(_Body):
    """A resume event for a run (`POST /executions/{run_id}/events`); field names as on the wire."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, extra="forbid")
    type: str = Field(examples=["MESSAGE_RECEIVED"])
    # The id's rules (1-200 printable characters) are the event's own, judged by well_formed with
    # the rest of the event, so a bad id in the body and in the header get the same answer.
    event_id: Annotated[str, WithJsonSchema({"type": "string", "maxLength": MAX_EVENT_ID})] | None = Field(
        default=None, description="or the Idempotency-Key header"
    )
    data: dict[str, Any] = Field(default_factory=dict, examples=[{"text": "Sí, sigo interesada"}])


class StartRequest(_Body):
    """Start a run of a published definition (`POST /executions`)."""

    agent: str = Field(pattern=f"^{AGENT_NAME_PATTERN}$", examples=["candidate-screening"])
    version: str | None = Field(
        default=None,
        min_length=1,
        max_length=50,
        description="a published version: its workflow_version hash or its version label (default: the latest)",
        examples=["1.0.0"],
    )
    input: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = Field(default=None, pattern=f"^{RUN_ID_PATTERN}$")
    events: list[EventRequest] = Field(
        default_factory=list,
        max_length=20,
        description="resume events delivered with the start, in order (each needs its events:<TYPE> scope)",
    )
    priority: int | None = Field(
        default=None,
        ge=1,
        le=5,
        description="1 (highest) to 5: ahead of lower ones on the task queue and in a key's line",
    )


class CancelRequest(_Body):
    """Cancel a run (`POST /executions/{run_id}/cancel`) with the reason kept in its audit trail."""

    reason: str = Field(min_length=1, max_length=500, pattern=r"\S", description="why; not blank")


class MigrateRequest(_Body):
    """Move a run to another published version of its agent (`POST /executions/{run_id}/migrate`)."""

    to: str = Field(
        min_length=1,
        max_length=50,
        examples=["2.0.0"],
        description="the target version: its workflow_version (hash) or its `version` label",
    )
    node_map: dict[str, str] = Field(
        default_factory=dict,
        max_length=200,
        examples=[{"documents": "papers"}],
        description="node of the run's version -> node of the target (a node not named maps to the same id)",
    )
    set: dict[str, Any] = Field(
        default_factory=dict, max_length=100, description="variables to set as the run moves (one the target reads)"
    )
    leave_wait: bool = Field(default=False, description="a wait mapped to another kind of node leaves its wait")
    restart_timers: bool = Field(default=False, description="the wait's timeout starts afresh on the target node")
    reason: str = Field(default="", max_length=500, description="why, recorded in the run's trail (RUN_MIGRATED)")
    dry_run: bool = Field(default=False, description="only check the move; nothing is sent to the run")


class RewindRequest(_Body):
    """Send a waiting run back to an earlier node of its path (`POST /executions/{run_id}/rewind`)."""

    to_node: str = Field(min_length=1, max_length=200, examples=["docs"], description="a node on the run's path")
    set: dict[str, Any] = Field(
        default_factory=dict,
        max_length=100,
        examples=[{"applicant": "ana@example.com"}],
        description="variables to correct as the run goes back (each one the node or a later one reads)",
    )
    reason: str = Field(min_length=1, max_length=500, description="why, recorded in the run's trail (RUN_REWOUND)")
    compensate: bool = Field(
        default=True, description="undo the saga steps done after the node, last first (false leaves them, recorded)"
    )
    requested_by: str | None = Field(
        default=None, max_length=200, description="who asks, recorded beside the key's name"
    )


# Deeper than any document the ingress takes (inputs and event data stop at 32 levels, checked
# with their field named later), and far from the parser's recursion limit.
MAX_JSON_DEPTH = 64
MAX_INTEGER_DIGITS = 4300  # Python's own limit for reading an integer (sys.get_int_max_str_digits)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"(?:\s*:)?|[\[\]{},]|-?\d[\d.eE+-]*|NaN|-?Infinity')


def check_json_text(text: str) -> None:
    """Raise ValueError naming where ``text`` holds JSON the ingress refuses (see the module's docstring).

    Text that is not JSON at all passes: the parser then names its own error.
    """
    frames: list[list[Any]] = []  # [is_array, label]: the key or index inside each open container
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("{", "["):
            if len(frames) >= MAX_JSON_DEPTH:
                raise ValueError(f"{_where(frames)}: nested more than {MAX_JSON_DEPTH} levels deep")
            frames.append([token == "[", 0 if token == "[" else None])
        elif token in ("}", "]"):
            if frames:
                frames.pop()
        elif token == ",":
            if frames and frames[-1][0]:
                frames[-1][1] += 1
        elif token.startswith('"'):
            if token.endswith(":") and frames and not frames[-1][0]:
                frames[-1][1] = json.loads(token[:-1].rstrip())
        else:
            _check_number(token, frames)


def _check_number(token: str, frames: list[list[Any]]) -> None:
    if token in ("NaN", "Infinity", "-Infinity"):
        raise ValueError(f"{_where(frames)}: {token} is not a JSON number")
    if any(mark in token for mark in ".eE"):
        try:
            number = float(token)
        except ValueError:
            return  # not a number at all: the parser names it
        if not math.isfinite(number):
            raise ValueError(f"{_where(frames)}: {token[:20]} is beyond a 64-bit float's range")
    elif len(token.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ValueError(f"{_where(frames)}: an integer of more than {MAX_INTEGER_DIGITS} digits")


def _where(frames: list[list[Any]]) -> str:
    labels = [f"[{label}]" if is_array else f".{label}" for is_array, label in frames if label is not None]
    shown = "".join(labels[:6]).lstrip(".") or "body"
    return shown + (".…" if len(labels) > 6 else "")


def is_json_media(media: str) -> bool:
    """Whether a Content-Type's media type (lower case, no parameters) is one FastAPI parses as JSON."""
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is checked by `check_json_text` before FastAPI parses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        parse = super().get_route_handler()

        async def handler(request: Request) -> Response:
            raw = await request.body()  # cached on the request: the parser reads the same bytes
            media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if raw and not is_json_media(media):
                # FastAPI would not parse it and answer 422 "Input should be a valid dictionary".
                raise Problem(
                    415,
                    "unsupported_media_type",
                    f"body: send JSON with Content-Type: application/json, not {media[:80] or 'no Content-Type'}",
                )
            if raw:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    # FastAPI's own answer would be an unnamed "error parsing the body".
                    raise Problem(400, "invalid_json", f"body: not UTF-8 text at byte offset {err.start}") from None
                try:
                    check_json_text(text)
                except ValueError as err:
                    raise Problem(400, "invalid_json", str(err)) from None
            return await parse(request)

        return handler


class HookRequest(_Body):
    """Subscribe a URL to events of runs (`POST /hooks`)."""

    url: str = Field(min_length=1, max_length=2000)
    events: list[str] = Field(min_length=1, max_length=10)
    agent: str | None = Field(default=None, max_length=200)
    max_attempts: int = Field(default=12, ge=1, le=100)
    first_retry_seconds: float = Field(default=1.0, gt=0, le=3600)
