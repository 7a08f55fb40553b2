"""Corrections as people type them (``VAR=VALUE``) and a rewind's answer in one line.

The CLI (`--set`) and the console (one assignment a line) read corrections the same way, and
both say what a rewind did in the same words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.rewind_io import RewindAck


def assignment_of(text: str, field: str = "--set") -> tuple[str, Any]:
    """``VAR=VALUE`` as (name, value): VALUE as JSON if it is JSON, else as text.

    Args:
        text: One assignment.
        field: What the error names (the option or form field it came from).

    Returns:
        The variable's name and its value.

    Raises:
        DsmoError: ``text`` is not ``VAR=VALUE``.
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise DsmoError(f"{field}: {text!r} is not VAR=VALUE")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def assignments_of(texts: Iterable[str], field: str = "--set") -> dict[str, Any]:
    """The assignments of ``texts``, later ones winning; see `assignment_of`."""
    return dict(assignment_of(text, field) for text in texts)


def rewind_summary(ack: RewindAck) -> str:
    """What a rewind did, in one line: where the run goes back from and to, and its saga steps."""
    said = f"run {ack.run_id} goes back from {ack.from_node or '(start)'} to {ack.to_node}"
    parts = []
    if ack.compensated:
        parts.append(f"undone: {', '.join(ack.compensated)}")
    if ack.compensation_failed:
        parts.append(f"undoing failed (retried apart): {', '.join(ack.compensation_failed)}")
    if ack.left:
        parts.append(f"left done: {', '.join(ack.left)}")
    return "; ".join([said, *parts]) if parts else f"{said}; no saga step to undo"
