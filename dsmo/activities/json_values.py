"""What a stage may store and report: plain JSON, finite numbers, a bounded depth.

Python's `json` writes ``NaN`` and ``Infinity`` (which no JSON reader accepts, and which the audit
trail turns into ``null``), and a `set` or an arbitrary object fails only when the output is
written, as a `TypeError` the orchestrator would retry as if the store were down. An agent's
output and a model's answer are checked here first, without recursion, so each of these is a
contract violation naming the field, like any other broken contract.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 64  # far past any real answer; well inside what the schema validator can recurse through


def json_problem(value: Any, *, what: str) -> str | None:
    """Where and why ``value`` is not plain JSON (``output.items[2]: nan is not ...``), or None."""
    pending: list[tuple[Any, int, str]] = [(value, 1, what)]
    while pending:
        current, depth, where = pending.pop()
        if depth > MAX_DEPTH:
            return f"{where}: nested more than {MAX_DEPTH} levels deep"
        if isinstance(current, str):
            try:
                current.encode()
            except UnicodeEncodeError:
                return f"{where}: not valid Unicode (a lone surrogate)"
            continue
        if current is None or isinstance(current, bool | int):
            continue
        if isinstance(current, float):
            if not math.isfinite(current):
                return f"{where}: {current} is not a JSON number (numbers must be finite)"
        elif isinstance(current, dict):
            for key, item in current.items():
                if not isinstance(key, str):
                    return f"{where}: the key {key!r} is not a string (JSON object keys are strings)"
                pending.append((item, depth + 1, f"{where}.{key[:40]}"))
                pending.append((key, depth, f"{where} (a key)"))  # a key is text too: judged before its value
        elif isinstance(current, list | tuple):
            pending.extend((item, depth + 1, f"{where}[{index}]") for index, item in enumerate(current))
        else:
            return f"{where}: a Python {type(current).__name__} is not a JSON value"
    return None
