"""DSMO installs one import name, `dsmo`, and every module is imported by that name."""

from __future__ import annotations

import ast
from pathlib import Path
from zipfile import ZipFile

import pytest

from tests.fresh_venv import build_wheel

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("dsmo", "starter", "bench", "tests", "examples")
# The repository's top-level links into the package (and the starter scripts' folder): importing
# by those names would load a second copy of every module.
BARE_NAMES = {"workflows", "activities", "starter", "worker"}
LINKS = ("workflows", "activities", "worker.py")


def _sources() -> list[Path]:
    # Not the user projects under tests/ (`*_project`): they are other distributions, some with
    # their own `workflows` and `activities` packages on purpose.
    found = (path for folder in FOLDERS for path in (REPO / folder).rglob("*.py"))
    return [path for path in found if not any(p.endswith("_project") for p in path.parts)]


def test_the_package_is_real_folders_and_the_top_level_names_link_into_it() -> None:
    links = [path for path in (REPO / "dsmo").rglob("*") if path.is_symlink()]
    assert links == [], "no link inside the package: tools that read paths must be able to follow it"
    for name in LINKS:
        link = REPO / name
        assert link.is_symlink() and link.resolve() == (REPO / "dsmo" / name).resolve(), name


@pytest.mark.parametrize("path", _sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_modules_are_imported_through_dsmo(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            assert name.split(".")[0] not in BARE_NAMES, f"line {node.lineno} imports {name}: use dsmo.{name}"


def test_the_wheel_has_one_top_level_import_name(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = next(name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info"))
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
    assert {name.split("/")[0] for name in names} == {"dsmo", dist_info}
    assert top_level == ["dsmo"]
    # Every room travels under dsmo.
    for module in ("dsmo/workflows/engine/agent_execution.py", "dsmo/activities/stage.py", "dsmo/cli/main.py"):
        assert module in names
    assert "dsmo/worker.py" in names and not any(name.startswith(("bench/", "tests/")) for name in names)
    # The examples are a distribution of their own (examples/pyproject.toml), not part of the core.
    assert not any(name.startswith(("dsmo/activities/agents/", "dsmo/activities/orders/")) for name in names)
    with ZipFile(wheel) as archive:
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    assert (
        "[dsmo.plugins]\nchannels = dsmo.activities.channels\n" in entry_points and "dsmo_examples" not in entry_points
    )
    # The console works offline: its templates and stylesheet ship inside the package.
    console = {name.removeprefix("dsmo/server/console/") for name in names if "/console/" in name}
    assert {"templates/run.html", "templates/tasks.html", "templates/login.html", "static/console.css"} <= console


# Small modules with one role; one past ~300 lines states its reason in its docstring.
LONG_MODULES = [
    path for path in _sources() if path.relative_to(REPO).parts[0] != "tests" and path.read_text().count("\n") > 300
]


@pytest.mark.parametrize("path", LONG_MODULES, ids=lambda path: str(path.relative_to(REPO)))
def test_a_long_module_says_why(path: Path) -> None:
    text = path.read_text()
    docstring = ast.get_docstring(ast.parse(text)) or ""
    assert "Longer than most modules" in docstring, f"{path.name}: split it or say why it is long"
