"""`dsmo init`'s project: names, files, and refusing to overwrite."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dsmo import load_definition
from dsmo.scaffold.new_project import InvalidProjectName, ProjectExists, project_names, scaffold


@pytest.mark.parametrize(
    ("name", "slug", "package"),
    [("ticket-desk", "ticket-desk", "ticket_desk"), ("My_Agents 2", "my-agents-2", "my_agents_2"), ("x", "x", "x")],
)
def test_names_come_from_the_project_name(name: str, slug: str, package: str) -> None:
    names = project_names(name)
    assert (names.slug, names.package, names.agent) == (slug, package, f"{slug}-triage")


@pytest.mark.parametrize(("name", "reason"), [("2fast", "start with a letter"), ("---", "start"), ("a" * 60, "longer")])
def test_an_unusable_name_is_refused(name: str, reason: str) -> None:
    with pytest.raises(InvalidProjectName, match=reason):
        project_names(name)


def test_the_project_is_complete_and_consistent(tmp_path: Path) -> None:
    written = scaffold(tmp_path / "desk", "ticket-desk")
    root = tmp_path / "desk"
    assert {str(path) for path in written} == {
        "pyproject.toml",
        "README.md",
        ".gitignore",
        "ticket_desk/__init__.py",
        "ticket_desk/agents.py",
        "tests/test_agents.py",
        "definitions/ticket-desk.yaml",
    }
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["dsmo.plugins"] == {"ticket-desk": "ticket_desk.agents"}
    definition = load_definition(root / "definitions" / "ticket-desk.yaml")
    assert definition.nodes["triage"].agent == "ticket-desk-triage"  # type: ignore[union-attr]
    for path in written:
        assert "$" not in (root / path).read_text().replace("$ ", ""), f"{path} has an unfilled placeholder"
    compiled = subprocess.run(
        [sys.executable, "-m", "py_compile", str(root / "ticket_desk" / "agents.py")], check=False
    )
    assert compiled.returncode == 0


def test_it_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "desk").mkdir()
    (tmp_path / "desk" / "notes.txt").write_text("mine")
    with pytest.raises(ProjectExists, match="not empty"):
        scaffold(tmp_path / "desk")
    assert [path.name for path in (tmp_path / "desk").iterdir()] == ["notes.txt"]


def test_the_command_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "desk").mkdir()
    (tmp_path / "desk" / "notes.txt").write_text("mine")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dsmo"), "init", "desk"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: desk: already exists and is not empty; dsmo init writes only into a new folder"
    ]


def test_the_tools_template_is_a_support_agent_whose_tools_are_tested_and_offered(tmp_path: Path) -> None:
    written = scaffold(tmp_path / "desk", "support-desk", template="tools")
    root = tmp_path / "desk"
    assert {str(path) for path in written} == {
        "pyproject.toml",
        "README.md",
        ".gitignore",
        "support_desk/__init__.py",
        "support_desk/tools.py",
        "tests/test_tools.py",
        "definitions/support-desk.yaml",
    }
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["dsmo.plugins"] == {"support-desk": "support_desk.tools"}
    definition = load_definition(root / "definitions" / "support-desk.yaml")
    tools = definition.nodes["think"].tools or []  # type: ignore[union-attr]
    assert [tool.action for tool in tools] == ["support-desk-lookup-order", "support-desk-refund-order"]
    for path in written:
        assert "$" not in (root / path).read_text().replace("$ ", ""), f"{path} has an unfilled placeholder"
    # The project's own tests pass as written (the tools registered, called as a tool call would).
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout
