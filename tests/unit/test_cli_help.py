"""Every command documents itself with an example; usage errors exit 2."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bench.__main__ import main as bench_command
from dsmo.cli.help_examples import commands
from dsmo.cli.main import cli

ALL = sorted(commands(cli))


@pytest.mark.parametrize(("path", "command"), ALL, ids=[path for path, _ in ALL])
def test_help_has_an_example(path: str, command: object) -> None:
    result = CliRunner().invoke(cli, [*path.split(), "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output, f"`dsmo {path} --help` shows no example"


@pytest.mark.parametrize(
    "args",
    [
        ["start"],
        ["cancel", "--reason", "x"],
        ["events", "r", "--type", "NOPE"],
        ["dlq", "redrive"],
        ["nope"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert CliRunner().invoke(cli, args).exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["floor", "--repeats", "0"],
        ["floor", "--repeats", "2", "--update"],
        ["migrate", "w5"],
        ["what-if", "migrate"],
    ],
)
def test_bench_usage_errors_exit_2(args: list[str]) -> None:
    assert CliRunner().invoke(bench_command, args).exit_code == 2
