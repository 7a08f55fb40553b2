"""DSMO installs one import name, `dsmo`, and every module is imported by that name."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from zipfile import ZipFile

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("workflows", "activities", "starter", "bench", "tests", "examples")
# The repository's folders, which the package maps under `dsmo.`: importing them by their
# folder name would load a second copy of every module.
BARE_NAMES = {"workflows", "activities", "starter", "worker"}


def _sources() -> list[Path]:
    return [REPO / "worker.py", *(path for folder in FOLDERS for path in (REPO / folder).rglob("*.py"))]


def test_the_package_links_to_the_repository_folders() -> None:
    for name in ("workflows", "activities", "starter", "worker.py"):
        link = REPO / "dsmo" / name
        assert link.is_symlink() and link.resolve() == (REPO / name).resolve(), name


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


def _source_copy(target: Path) -> Path:
    """The project's files, symlinks kept: building in the repository would leave `build/` and a
    `dsmo.egg-info` whose stale metadata (entry points) shadows the installed one."""
    for name in ("pyproject.toml", "README.md", "worker.py"):
        shutil.copy2(REPO / name, target / name)
    for folder in ("dsmo", "workflows", "activities", "starter"):
        shutil.copytree(REPO / folder, target / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_the_wheel_has_one_top_level_import_name(tmp_path: Path) -> None:
    (tmp_path / "source").mkdir()
    source = _source_copy(tmp_path / "source")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("dsmo-*.whl")
    with ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = next(name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info"))
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
    assert {name.split("/")[0] for name in names} == {"dsmo", dist_info}
    assert top_level == ["dsmo"]
    # The linked folders travel as real files, under dsmo.
    for module in ("dsmo/workflows/execution.py", "dsmo/activities/stage.py", "dsmo/starter/cli/main.py"):
        assert module in names
    assert "dsmo/worker.py" in names and not any(name.startswith(("bench/", "tests/")) for name in names)


# Small modules with one role; one past ~300 lines states its reason in its docstring.
LONG_MODULES = [
    path for path in _sources() if path.relative_to(REPO).parts[0] != "tests" and path.read_text().count("\n") > 300
]


@pytest.mark.parametrize("path", LONG_MODULES, ids=lambda path: str(path.relative_to(REPO)))
def test_a_long_module_says_why(path: Path) -> None:
    text = path.read_text()
    docstring = ast.get_docstring(ast.parse(text)) or ""
    assert "Longer than most modules" in docstring, f"{path.name}: split it or say why it is long"
