"""Transition conditions (the paper's φ) in CEL, compiled once and evaluated only by the orchestrator.

CEL is data, not code: no statements, no attribute access into Python objects, no I/O. We use
`common-expression-language` (Rust, with cel-go's string/list extensions), measured inside the
workflow sandbox at ~17 µs per evaluation against ~700 µs for the pure-Python cel-python.
A condition sees only: `stages` (status and small summaries of earlier stages), `run`
(metadata), `config` (the definition's parameters) and the run's variables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import cel
from cel.stdlib import EXTENSIONS, add_stdlib_to_context

from workflows.errors import DsmoError

BUILTIN_ROOTS = ("stages", "run", "config")
# Variables the seed's resume events set; conditions may read them without declaring them.
SEED_VARIABLES = (
    "lastResponse",
    "documentUrls",
    "signedDocumentUrl",
    "signedAt",
    "testScore",
    "testResult",
    "eventResult",
    "eventData",
    "triggeredExecutionId",
    "childExecutionStatus",
    "childExecutionSuccess",
)
_MACRO_VARIABLE = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MEMBER = re.compile(r"\b(stages|config)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Functions the Rust core provides (macros such as has/all/exists expand before this list).
NATIVE_FUNCTIONS = frozenset(
    [
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "bool",
        "timestamp",
        "duration",
        "dyn",
        "type",
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "max",
        "min",
        "getFullYear",
        "getMonth",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
    ]
)
# The cel-go style extensions registered for evaluation; a namespaced one (math.greatest) is
# reported by the compiler under its last segment.
KNOWN_FUNCTIONS = NATIVE_FUNCTIONS | frozenset(
    part for library in EXTENSIONS.values() for name in library for part in (name, name.rsplit(".", 1)[-1])
)


class ConditionError(DsmoError):
    """A condition that does not compile, refers to something unknown, or did not yield a bool."""

    code = "condition_error"


@lru_cache(maxsize=1024)
def compile_condition(expression: str) -> Any:
    try:
        return cel.compile(expression)
    except (ValueError, RuntimeError) as err:
        raise ConditionError(f"does not compile: {_first_error(str(err)) or type(err).__name__}") from None


def _first_error(text: str) -> str:
    """The parser's first `ERROR: <input>:L:C: reason` as `reason at column C` (no caret art)."""
    found = re.search(r"ERROR: <input>:\d+:(\d+): ([^\n]+)", text)
    if found is None:
        return text.strip().splitlines()[0][:200] if text.strip() else ""
    # ANTLR's "expecting {'[', '{', ...}" lists every token; the position says more.
    reason = found.group(2).split(" expecting {", 1)[0].strip()[:160]
    return f"{reason} (at column {found.group(1)})"


def check_condition(
    expression: str,
    *,
    inputs: Iterable[str],
    stages: Iterable[str],
    config_keys: Iterable[str],
    check_functions: bool = True,
) -> None:
    """Static checks at publish time: it compiles and refers only to known fields (and functions)."""
    program = compile_condition(expression)
    for function in program.functions() if check_functions else ():
        # Operators come as `_+_`, `!_`, `@in`...; only named calls can be unknown.
        if _IDENTIFIER.fullmatch(function) and function not in KNOWN_FUNCTIONS:
            raise ConditionError(f"calls unknown function {function!r}")
    bound = set(_MACRO_VARIABLE.findall(expression))
    known = set(BUILTIN_ROOTS) | set(SEED_VARIABLES) | set(inputs)
    for name in program.variables():
        if name not in known and name not in bound:
            raise ConditionError(
                f"refers to unknown field {name!r} (known: stages, run, config, the seed's variables"
                f"{', ' + ', '.join(sorted(inputs)) if inputs else ''}; declare run inputs under `inputs:`)"
            )
    without_strings = _STRING.sub('""', expression)
    stage_names, config_names = set(stages), set(config_keys)
    for root, member in _MEMBER.findall(without_strings):
        if root == "stages" and member not in stage_names:
            raise ConditionError(
                f"refers to unknown stage {member!r} (stages: {', '.join(sorted(stage_names)) or 'none'})"
            )
        if root == "config" and member not in config_names:
            raise ConditionError(
                f"refers to unknown config key {member!r} (config: {', '.join(sorted(config_names)) or 'none'})"
            )


def evaluate_condition(expression: str, activation: Mapping[str, Any]) -> bool:
    """True or False, or ConditionError (a missing key, a type mismatch, a non-bool result)."""
    context = cel.Context(variables=dict(activation))
    add_stdlib_to_context(context)
    try:
        result = compile_condition(expression).execute(context)
    except ConditionError:
        raise
    except Exception as err:  # noqa: BLE001 - the library raises builtins for evaluation errors
        raise ConditionError(f"{expression!r} failed: {type(err).__name__}: {str(err).splitlines()[0][:200]}") from None
    if not isinstance(result, bool):
        raise ConditionError(f"{expression!r} yielded {type(result).__name__}, not a bool")
    return result
