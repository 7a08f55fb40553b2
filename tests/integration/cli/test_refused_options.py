"""Input `dsmo` would otherwise misread is refused with one line, and nothing is touched.

An empty `--query` (a `"$FILTER"` whose variable is unset), an empty `--reason`, an option the
command would ignore, a candidate that is not one: each is refused before any run is acted on.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dsmo.client.query_errors import EMPTY_QUERY
from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "candidate_screening.yaml"
NOTHING = "WorkflowId = 'refused-options-none'"


async def cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [str(BIN / "dsmo"), *args], capture_output=True, text=True, env=harness.cli_env(), timeout=60
    )


def error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The one error line of a refused command that exits ``code``; click's usage lines aside."""
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    if lines and lines[0].startswith("Usage: "):  # click's usage errors: "Usage: / Try ... / Error: ..."
        assert lines[-1].startswith("Error: "), proc.stderr
        return lines[-1].removeprefix("Error: ")
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0].removeprefix("error: ")


def candidate(tmp_path: Path) -> Path:
    """A candidate of an agent no run has: a what-if of it selects nothing."""
    path = tmp_path / "candidate.yaml"
    path.write_text(EXAMPLE.read_text().replace("agent: candidate-screening", f"agent: refused-{uuid.uuid4().hex[:8]}"))
    return path


async def waiting_run(harness: Harness) -> str:
    run_id = await harness.start(definition_from(EXAMPLE), {"candidate": {"name": "Ana", "phone": "600"}})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    return run_id


# The bulk commands are dry runs: should the refusal ever break, a real one would act on every
# run of the shared stack. Before the fix each of these printed a line per run of every agent.
QUERY_COMMANDS = {
    "bulk-cancel": (["runs", "bulk", "cancel", "--reason", "x", "--dry-run"], 1),
    "bulk-redrive": (["runs", "bulk", "redrive", "--dry-run"], 1),
    "bulk-deliver": (["runs", "bulk", "deliver", "--type", "EVENT_COMPLETED", "--dry-run"], 1),
    "migrate": (["runs", "migrate", "refused-no-such-agent", "--to", "1.0.0", "--dry-run"], 1),
    "cancel": (["cancel", "--reason", "x"], 1),
    "list": (["runs", "list"], 1),
    "what-if": (["replay", "--definition", "{candidate}"], 2),
}


@pytest.mark.parametrize("query", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize("command", list(QUERY_COMMANDS))
async def test_an_empty_query_is_refused_by_every_command_that_takes_one(
    harness: Harness, tmp_path: Path, command: str, query: str
) -> None:
    args, code = QUERY_COMMANDS[command]
    filled = [str(candidate(tmp_path)) if arg == "{candidate}" else arg for arg in args]
    done = await cli(harness, *filled, "--query", query)
    assert error_line(done, code) == EMPTY_QUERY
    assert done.stdout == ""


async def test_a_wrong_candidate_exits_2_with_its_one_line(harness: Harness, tmp_path: Path) -> None:
    malformed, wrong_type = tmp_path / "malformed.yaml", tmp_path / "wrong-type.yaml"
    malformed.write_text("agent: [unclosed")
    wrong_type.write_text("- a\n- list\n")
    published = definition_from(candidate(tmp_path))
    await harness.dsmo.publish(published)
    agent = published.agent
    cases = [
        (["--definition", str(malformed)], ["malformed.yaml", "not valid YAML/JSON"]),
        (["--definition", str(wrong_type)], ["wrong-type.yaml", "a definition is a mapping"]),
        (["--version", "99", "--agent", agent], ["--version: ", "no published version '99'"]),
        (["--version", "1.0.0", "--agent", f"{agent}-unknown"], ["--agent: ", "no published definition"]),
        (["--version", "1.0.0"], ["--agent: required with --version"]),
    ]
    for args, fragments in cases:
        line = error_line(await cli(harness, "replay", "--query", NOTHING, *args), 2)
        assert all(fragment in line for fragment in fragments), (args, line)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["some-run", "--query", NOTHING, "--definition", "{candidate}"], "RUN_ID: not with --query"),
        (["--from-stage", "ask", "--query", NOTHING, "--definition", "{candidate}"], "--from-stage: not with --query"),
        (["some-run", "--limit", "3"], "--limit: only with --query"),
        (["some-run", "--definition", "{candidate}"], "--definition: only with --query"),
    ],
    ids=["run-and-query", "from-stage-and-query", "limit-alone", "definition-alone"],
)
async def test_replay_refuses_the_options_of_the_way_not_taken(
    harness: Harness, tmp_path: Path, args: list[str], option: str
) -> None:
    filled = [str(candidate(tmp_path)) if arg == "{candidate}" else arg for arg in args]
    done = await cli(harness, "replay", *filled)
    assert error_line(done, 2).startswith(option)
    assert done.stdout == ""


async def test_a_fork_with_a_map_but_no_version_is_refused_and_starts_nothing(harness: Harness, tmp_path: Path) -> None:
    run_id = await waiting_run(harness)
    map_file = tmp_path / "map.yaml"
    map_file.write_text("ask: ask_again\n")
    for args, option in [(["--map", "ask:ask_again"], "--map"), (["--map-file", str(map_file)], "--map-file")]:
        done = await cli(harness, "runs", "fork", run_id, "--from", "ask", *args)
        assert error_line(done, 2).startswith(f"{option}: only with --version")
    assert await harness.dsmo.forks(run_id) == []
    started = [r.id async for r in harness.dsmo.temporal.list_workflows(f"WorkflowId STARTS_WITH '{run_id}.fork'")]
    assert started == []


async def test_a_cancel_without_a_reason_is_refused_and_the_run_goes_on_waiting(harness: Harness) -> None:
    run_id = await waiting_run(harness)
    mine = f"WorkflowId = '{run_id}'"
    for args in [
        ["cancel", run_id, "--reason", ""],
        ["cancel", run_id, "--reason", "   "],
        ["cancel", "--query", mine, "--reason", ""],
        ["runs", "bulk", "cancel", "--query", mine, "--reason", " "],
    ]:
        line = error_line(await cli(harness, *args), 1)
        assert line.startswith("--reason: say why the run"), (args, line)
    view = await harness.dsmo.status(run_id)
    assert view.status is RunStatus.WAITING
    described = await harness.dsmo.temporal.get_workflow_handle(run_id).describe()
    assert not described.raw_description.workflow_extended_info.cancel_requested
