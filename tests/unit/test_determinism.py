"""workflows/ stays deterministic by construction: no I/O, clock, randomness or thread imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "dsmo" / "workflows"
WORKFLOWS = sorted(ROOT.rglob("*.py"))
FORBIDDEN = {
    "boto3",
    "botocore",
    "time",
    "random",
    "os",
    "requests",
    "httpx",
    "urllib",
    "socket",
    "threading",
    "subprocess",
    "asyncio.subprocess",
    "datetime.datetime.now",
    "uuid",
    "secrets",
    "pathlib",
    "shutil",
    # The rest of the package: everything above the workflow.
    "activities",
    "config",
    "runtime",
    "client",
    "cli",
    "server",
    "devstack",
    "scaffold",
    "worker",
}
FORBIDDEN_CALLS = {"datetime.now", "datetime.utcnow", "date.today", "time.time", "open", "uuid.uuid4"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_forbidden_imports(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for imported in names:
            name = imported.removeprefix("dsmo.")
            root = name.split(".")[0]
            assert root not in FORBIDDEN and name not in FORBIDDEN, f"{path.name} imports {imported}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_clock_or_file_calls(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            assert called not in FORBIDDEN_CALLS, f"{path.name} calls {called}"


def test_workflows_found() -> None:
    found = {str(p.relative_to(ROOT)) for p in WORKFLOWS}
    assert found >= {"engine/agent_execution.py", "common/status.py", "definition/model.py"}
