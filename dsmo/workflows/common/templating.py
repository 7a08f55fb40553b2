"""``{{ path }}`` templates over run variables: dotted paths and ``[n]`` indexes, nothing else.

A template is data, never code: there is no expression evaluation, attribute access into
Python objects or function call. A missing variable is an error naming it, never "", unless
the placeholder declares a default: ``{{ lastResponse | default("no reply") }}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dsmo.workflows.common.errors import TemplateError

# Linear time: the content cannot contain a brace, so each `{{` is scanned at most up to the
# next brace (a lazy match with surrounding \s* backtracked quadratically on long blank runs).
_PLACEHOLDER = re.compile(r"\{\{([^{}]*)\}\}")
MAX_PLACEHOLDER = 300  # characters between the braces: a path and a short default
_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*|\[\d+\]")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])*")
_DEFAULT = re.compile(r"""(?P<path>.+?)\s*\|\s*default\(\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*\)""")


def _split(expression: str) -> tuple[str, str | None]:
    """``path`` or ``path | default("x")`` -> (path, default or None), syntax-checked."""
    expression = expression.strip()
    if len(expression) > MAX_PLACEHOLDER:
        raise TemplateError(f"invalid placeholder {{{{{expression[:40]}…}}}}: longer than {MAX_PLACEHOLDER} characters")
    match = _DEFAULT.fullmatch(expression)
    path, default = (match.group("path"), match.group("dq") or match.group("sq") or "") if match else (expression, None)
    if not _PATH.fullmatch(path):
        raise TemplateError(
            f"invalid placeholder {{{{{expression}}}}}: use a variable path like candidate.name or "
            'documentUrls[0], optionally with | default("text")'
        )
    return path, default


def placeholders(template: str) -> list[str]:
    """The variable paths a template refers to, checked for syntax."""
    return [_split(match.group(1))[0] for match in _PLACEHOLDER.finditer(template)]


def required_placeholders(template: str) -> list[str]:
    """The variable paths a template cannot render without (those with no ``default``)."""
    return [path for path, default in (_split(m.group(1)) for m in _PLACEHOLDER.finditer(template)) if default is None]


def lookup(variables: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` (``a.b[0].c``) or TemplateError naming the missing part."""
    if not _PATH.fullmatch(path):
        raise TemplateError(f"invalid variable path {path!r}")
    current: Any = variables
    walked = ""
    for segment in _SEGMENT.findall(path):
        if segment.startswith("["):
            index = int(segment[1:-1])
            if not isinstance(current, Sequence) or isinstance(current, str) or index >= len(current):
                raise TemplateError(
                    f"variable {walked}{segment} is missing (no item {index} in {walked or 'variables'})"
                )
            current = current[index]
            walked += segment
        else:
            if not isinstance(current, Mapping) or segment not in current:
                name = f"{walked}.{segment}" if walked else segment
                raise TemplateError(f"variable {name} is missing")
            current = current[segment]
            walked = f"{walked}.{segment}" if walked else segment
    return current


def render(template: str, variables: Mapping[str, Any]) -> str:
    """Substitute every ``{{path}}``; non-string values are written as compact JSON."""
    placeholders(template)

    def substitute(match: re.Match[str]) -> str:
        path, default = _split(match.group(1))
        try:
            value = lookup(variables, path)
        except TemplateError:
            if default is None:
                raise
            value = default
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    return _PLACEHOLDER.sub(substitute, template)


def render_values(value: Any, variables: Mapping[str, Any]) -> Any:
    """Render every string inside ``value`` (dicts and lists walked); a whole ``{{path}}`` keeps its type."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value.strip())
        if whole:
            path, default = _split(whole.group(1))
            try:
                return lookup(variables, path)
            except TemplateError:
                if default is None:
                    raise
                return default
        return render(value, variables)
    if isinstance(value, dict):
        return {key: render_values(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [render_values(item, variables) for item in value]
    return value
