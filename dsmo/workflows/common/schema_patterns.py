"""The regular expressions a JSON Schema holds (`pattern`, `patternProperties`), matched by RE2.

Python's `re` backtracks: ``^(a+)+$`` against 34 ``a``s and a ``!`` takes minutes, and the text
it is matched against can be a model's answer, steered by whoever wrote the run's input. RE2
matches in time linear in the text, whatever the pattern, and has no lookaround or
backreferences (the features that need backtracking). A schema is admitted only if RE2 compiles
every one of its patterns; the validator (`activities.contract_schemas`) then matches with RE2.

Pure: `re2` is imported where a schema is admitted or checked, never inside a workflow.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

# Keywords whose values are data, not subschemas: a `pattern` key inside them is not a pattern.
_DATA_KEYWORDS = frozenset({"const", "default", "enum", "examples"})


class UnsupportedPattern(ValueError):
    """A pattern RE2 cannot compile (lookaround, a backreference, bad syntax)."""


def patterns(schema: Any, where: tuple[str, ...] = ()) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every (pattern, where) of ``schema``: `pattern` values and `patternProperties` keys."""
    pending: list[tuple[Any, tuple[str, ...]]] = [(schema, where)]
    while pending:
        current, path = pending.pop()
        if isinstance(current, list):
            pending.extend((item, (*path, str(index))) for index, item in enumerate(current))
            continue
        if not isinstance(current, dict):
            continue
        for key, value in current.items():
            if key in _DATA_KEYWORDS:
                continue
            if key == "pattern" and isinstance(value, str):
                yield value, (*path, key)
            elif key == "patternProperties" and isinstance(value, dict):
                yield from ((name, (*path, key, name)) for name in value)
            pending.append((value, (*path, key)))


def check_patterns(schema: Any) -> None:
    """Raise UnsupportedPattern naming the first pattern of ``schema`` RE2 cannot compile.

    Also refused: `unevaluatedProperties` beside `patternProperties`, since jsonschema finds the
    properties the first leaves out by matching the second with Python's `re`.
    """
    found = False
    for pattern, where in patterns(schema):
        found = found or where[-2:-1] == ("patternProperties",)
        try:
            compiled(pattern)
        except UnsupportedPattern as err:
            raise UnsupportedPattern(f"{'.'.join(where) or 'schema'}: {err}") from None
    if found and _uses(schema, "unevaluatedProperties"):
        raise UnsupportedPattern("unevaluatedProperties: not supported beside patternProperties")


def _uses(schema: Any, keyword: str) -> bool:
    pending = [schema]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            if keyword in current:
                return True
            pending.extend(value for key, value in current.items() if key not in _DATA_KEYWORDS)
        elif isinstance(current, list):
            pending.extend(current)
    return False


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (cached: every answer to a node is checked with the same ones).

    Raises:
        UnsupportedPattern: RE2 cannot compile it; the message says why.
    """
    import re2

    options = re2.Options()
    options.log_errors = False  # the reason is in the exception; RE2 would also print it to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as err:
        reason = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else str(err)
        raise UnsupportedPattern(
            f"{pattern[:80]!r} is not a pattern the linear-time engine (RE2) accepts ({reason}); "
            "lookaround and backreferences are not supported"
        ) from None
