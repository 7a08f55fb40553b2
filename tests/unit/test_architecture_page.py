"""docs/architecture.md stays true: its tables, the modules and functions it names, its routes.

The page is the first one a newcomer reads. Its module tables are generated from the modules'
docstrings (`docs/gen_module_table.py`); its prose names modules by their path from the
repository's root (`dsmo/workflows/run/intake.py`) and functions by `path.py:name` (`Class.method`
for a method); each `Route:` line is a chain of functions, each of which must name the next.
This test reads all of that back against the code.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import itertools
import re
import typing
from pathlib import Path
from types import ModuleType

import pytest

from dsmo.workflows.definition.model import Node
from dsmo.workflows.definition.node_types import ACTION_TYPES, NODE_TYPES
from dsmo.workflows.engine.node_step import HANDLERS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
FIX = "python docs/gen_module_table.py"
MODULE = re.compile(r"`((?:[a-z0-9_]+/)*[a-z0-9_]+\.py)(?::([A-Za-z_][\w.]*))?`")
ROUTE = re.compile(r"^\s*Route: (.+)$", re.MULTILINE)


def generator() -> ModuleType:
    """docs/gen_module_table.py, loaded from its file (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("gen_module_table", ROOT / "docs" / "gen_module_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = generator()


def named(page: str | None = None) -> list[tuple[str, str | None]]:
    """The modules and functions the page names (in a generated table: the rows' own paths only)."""
    text = PAGE.read_text() if page is None else page
    # A row's role is a docstring's sentence, written relative to its module: only its path counts.
    prose = GEN.BLOCK.sub(lambda m: "\n".join(re.findall(r"^\| (`[^`]+`) \|", m["body"], re.MULTILINE)), text)
    return [(match[1], match[2]) for match in MODULE.finditer(prose)]


def defines(path: Path, dotted: str) -> ast.AST | None:
    """The function, class or assigned name ``dotted`` (``Class.method``) in a module, if there."""
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    found: ast.AST | None = None
    for part in dotted.split("."):
        found = next((node for node in scope if part in _names(node)), None)
        if found is None:
            return None
        scope = getattr(found, "body", [])
    return found


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def references(function: ast.AST) -> set[str]:
    """Every name and attribute a function's body uses: what it calls, passes or reads."""
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


def route_steps(page: str | None = None) -> list[tuple[str, str]]:
    """Each arrow of each `Route:` line, as (caller, callee), both ``path.py:name``."""
    text = PAGE.read_text() if page is None else page
    steps: list[tuple[str, str]] = []
    for line in ROUTE.findall(text):
        chain = [part.strip().strip("`") for part in line.split("→")]
        steps.extend(itertools.pairwise(chain))
    return steps


def calls_next(caller: str, callee: str) -> str | None:
    """Why ``caller`` does not lead to ``callee``, or None when its body names it."""
    path, _, name = caller.partition(":")
    function = defines(ROOT / path, name) if (ROOT / path).is_file() else None
    if function is None:
        return f"{caller} does not exist"
    wanted = callee.partition(":")[2].split(".")[-1]
    if wanted not in references(function):
        return f"{caller} never names {wanted} ({callee})"
    return None


def test_the_module_tables_are_what_the_generator_writes() -> None:
    page = PAGE.read_text()
    fresh = GEN.render(page)
    diff = "\n".join(list(difflib.unified_diff(page.splitlines(), fresh.splitlines(), lineterm=""))[:40])
    assert fresh == page, f"docs/architecture.md's module tables are stale; run `{FIX}`:\n{diff}"


def test_every_module_the_page_names_exists() -> None:
    missing = sorted({path for path, _ in named() if not (ROOT / path).is_file()})
    assert not missing, f"docs/architecture.md names modules that no longer exist: {missing}"


def test_every_function_the_page_names_exists() -> None:
    missing = sorted(
        f"{path}:{name}"
        for path, name in named()
        if name and (ROOT / path).is_file() and not defines(ROOT / path, name)
    )
    assert not missing, f"docs/architecture.md names functions that no longer exist: {missing}"


def test_the_page_names_every_module() -> None:
    mentioned = {path for path, _ in named()}
    everything = {path for paths in GEN.modules().values() for path in paths}
    unmentioned = sorted(everything - mentioned)
    assert not unmentioned, f"docs/architecture.md does not mention: {unmentioned}; run `{FIX}`"


def test_the_page_has_its_routes() -> None:
    # Publish, start, begin, the resume event's way in, its check, its take, the wait, the next node.
    assert len(ROUTE.findall(PAGE.read_text())) >= 10
    assert all(MODULE.fullmatch(f"`{part}`") for step in route_steps() for part in step)


@pytest.mark.parametrize(
    ("caller", "callee"), route_steps(), ids=[f"{a.split(':')[-1]}->{b.split(':')[-1]}" for a, b in route_steps()]
)
def test_each_route_step_names_the_next(caller: str, callee: str) -> None:
    problem = calls_next(caller, callee)
    assert problem is None, f"docs/architecture.md's route is wrong: {problem}"


def test_the_handler_table_covers_every_node_type() -> None:
    union = {
        typing.get_args(node.model_fields["action_type"].annotation)[0] for node in typing.get_args(Node)[0].__args__
    }
    assert set(ACTION_TYPES) == union, "NODE_TYPES and the definition model's `Node` union differ"
    assert len(ACTION_TYPES) == len(NODE_TYPES) == len(set(ACTION_TYPES))
    assert set(HANDLERS) == set(ACTION_TYPES), (
        f"node types without a handler: {sorted(set(ACTION_TYPES) - set(HANDLERS))}; "
        f"handlers of no node type: {sorted(set(HANDLERS) - set(ACTION_TYPES))}"
    )


def test_the_checks_would_catch_a_stale_page(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "LIMIT = 3\n\nclass Run:\n    def step(self): ...\n\nasync def take():\n    return Run().step()\n"
    )
    assert defines(module, "Run.step")
    assert defines(module, "take")
    assert defines(module, "LIMIT")
    assert not defines(module, "Run.apply_event")
    assert not defines(module, "check")
    assert MODULE.findall("see `workflows/run/intake.py:take` and `worker.py`") == [
        ("workflows/run/intake.py", "take"),
        ("worker.py", ""),
    ]
    assert route_steps("Route: `a.py:f` → `b.py:C.g` → `c.py:h`\n") == [("a.py:f", "b.py:C.g"), ("b.py:C.g", "c.py:h")]
    # An absolute path replaces ROOT when joined, so the route check reads the module above.
    assert calls_next(f"{module}:take", "x.py:Run.step") is None
    assert calls_next(f"{module}:take", "x.py:check") == f"{module}:take never names check (x.py:check)"
    assert calls_next(f"{module}:gone", "x.py:check") == f"{module}:gone does not exist"
