"""docs/architecture.md stays true: every module it names exists, and it names every module there is.

The page is the first one a newcomer reads. It names modules by their path from the repository's
root (`dsmo/workflows/run/intake.py`) and, in the routes, functions by `path.py:name` (`Class.method`
for a method); this test reads those names back against the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
# The folders the installed package `dsmo` is made of, plus the examples distribution.
PACKAGES = ("dsmo", "examples/dsmo_examples")
MODULE = re.compile(r"`((?:[a-z_]+/)*[a-z_]+\.py)(?::([A-Za-z_][\w.]*))?`")


def named() -> list[tuple[str, str | None]]:
    return [(match[1], match[2]) for match in MODULE.finditer(PAGE.read_text())]


def modules() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if path.name != "__init__.py" and "project_template" not in relative.parts:
                found.add(relative.as_posix())
    return found


def defines(path: Path, dotted: str) -> bool:
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    for part in dotted.split("."):
        match = next(
            (
                node
                for node in scope
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == part
            ),
            None,
        )
        if match is None:
            return False
        scope = match.body
    return True


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
    unmentioned = sorted(modules() - mentioned)
    assert not unmentioned, f"docs/architecture.md does not mention: {unmentioned}"


def test_the_checks_would_catch_a_stale_page(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("class Run:\n    def step(self): ...\n\nasync def take(): ...\n")
    assert defines(module, "Run.step")
    assert defines(module, "take")
    assert not defines(module, "Run.apply_event")
    assert not defines(module, "check")
    assert MODULE.findall("see `workflows/run/intake.py:take` and `worker.py`") == [
        ("workflows/run/intake.py", "take"),
        ("worker.py", ""),
    ]
