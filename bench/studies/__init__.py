"""The bench's studies: each measures one thing and owns one section of BENCHMARKS.md.

`python -m bench <study>` runs one (see `bench.__main__`); every study answers the same small
protocol, so the one command can run it, print it and splice its section the same way.
"""

from __future__ import annotations

from typing import Any, Protocol

from bench.stack import Stack


class Study(Protocol):
    """One study: what `python -m bench <name>` runs.

    Attributes:
        name: the subcommand that runs it.
        markers: its section's two markers in BENCHMARKS.md; None when it prints only (no
            `--update`).
    """

    name: str
    markers: tuple[str, str] | None

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Measure on ``stack()``, save the results file, print the figures; the results.

        A true ``results["failed"]`` (a bound not met) makes the command exit 1.
        """
        ...

    def section(self, results: dict[str, Any]) -> str | None:
        """The study's BENCHMARKS.md section (markers included) from ``results``; None if it did not run."""
        ...
