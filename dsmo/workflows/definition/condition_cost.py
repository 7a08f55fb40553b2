"""What a condition can cost, before it runs: comprehension nesting times collection sizes.

CEL evaluates `list.map(x, ...)`, `filter`, `all`, `exists` and `exists_one` by visiting every
element; nested, they multiply (six nested maps over ten items: a million visits, ~8 s). The
CEL library has no cost limit of its own, and an evaluation inside a workflow task cannot be
interrupted, so the bound is decided before evaluation, the way Kubernetes bounds CEL rules:

- at publish, with every collection assumed to hold `ASSUMED_ITEMS` items, the estimate must
  stay within `COST_BUDGET` (and nesting within `MAX_NESTING`);
- at run time, with the largest collection the condition can see measured in its activation;
  above the budget the condition is not evaluated (a contract violation, not a stuck task).

Extension functions whose cost depends on their arguments are capped where they are
registered (see `dsmo.workflows.definition.conditions`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

COST_BUDGET = 100_000  # element visits: ~0.2 s of evaluation at the ~2 µs each measured here
ASSUMED_ITEMS = 100  # a collection's size at publish, when nothing says otherwise
MAX_NESTING = 2
MAX_ITEMS = 10_000  # the most items a capped function may produce or take
MAX_STRING = 64 * 1024  # the longest string a capped function may produce

COMPREHENSIONS = ("all", "exists", "exists_one", "map", "filter")
_TOKEN = re.compile(
    r"""(?P<string>[rRbB]{0,2}(?:'''(?:.|\n)*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))"""
    r"|(?P<macro>\.\s*(?:" + "|".join(COMPREHENSIONS) + r")\s*\()"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])"
)


@dataclass(frozen=True)
class ConditionShape:
    """The comprehensions of one expression, by nesting depth (1 = not inside another)."""

    depths: tuple[int, ...]

    @property
    def nesting(self) -> int:
        return max(self.depths, default=0)

    def cost(self, items: int) -> int:
        """Element visits if every collection holds ``items`` items (at least one visit)."""
        return max(1, sum(int(max(items, 1) ** depth) for depth in self.depths))


@lru_cache(maxsize=1024)
def shape(expression: str) -> ConditionShape:
    """Find each comprehension and how deeply it is nested, skipping string literals."""
    depths: list[int] = []
    stack: list[bool] = []  # per open bracket: does it open a comprehension's arguments?
    for match in _TOKEN.finditer(expression):
        if match.group("macro"):
            depths.append(sum(stack) + 1)
            stack.append(True)
        elif match.group("open"):
            stack.append(False)
        elif match.group("close") and stack:
            stack.pop()
    return ConditionShape(tuple(depths))


def largest_collection(value: Any, *, limit: int = 1_000_000) -> int:
    """The most items (or characters, for strings) of any list, map or string in ``value``.

    Walks at most ``limit`` values: past that the answer is "at least ``limit``".
    """
    largest, seen = 0, 0
    pending = [value]
    while pending and seen < limit:
        current = pending.pop()
        seen += 1
        if isinstance(current, Mapping):
            largest = max(largest, len(current))
            pending.extend(current.values())
        elif isinstance(current, list | tuple):
            largest = max(largest, len(current))
            pending.extend(current)
        elif isinstance(current, str):
            largest = max(largest, len(current))
    return largest if seen < limit else max(largest, limit)
