"""The studies not moved into `bench/studies/` yet, behind the `Study` protocol.

Each wraps its section's `*_only` function, which still publishes its own section (so `markers`
is None here: the command leaves BENCHMARKS.md to it) and its own results file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bench import flow_cli, migration_cli, subject_bench, table1_cli, what_if_cli
from bench.paths import RESULTS
from bench.stack import Stack
from bench.studies import full

# A section run alone: (quick, the bench's stack, update) -> its results.
Only = Callable[[bool, Stack, bool], Awaitable[dict[str, Any]]]


@dataclass
class Adapted:
    """One legacy section behind the protocol: ``only`` runs and publishes it, ``text`` is its section."""

    name: str
    only: Only
    text: Callable[[dict[str, Any]], str | None]
    update: bool = False
    markers: tuple[str, str] | None = None

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """The section alone; with ``update``, its part of BENCHMARKS.md rewritten by it."""
        return await self.only(quick, stack, self.update)

    def section(self, results: dict[str, Any]) -> str | None:
        """Its section's text from ``results``."""
        return self.text(results)


def _table1_text(results: dict[str, Any]) -> str:
    return f"{table1_cli.START}\n{table1_cli.table1_text(results, own_run=True)}\n{table1_cli.END}"


def _peers_text(results: dict[str, Any]) -> str | None:
    from bench.peers.peers_report import section

    return section(results)


async def _peers(quick: bool, stack: Stack, update: bool) -> dict[str, Any]:
    from bench.peers.peers_cli import peers_only  # imports LangGraph and DBOS: only when asked

    return await peers_only(quick, update_benchmarks=update)


def _scale_text(results: dict[str, Any]) -> str | None:
    from bench.scale_report import scale_section

    return scale_section(results)


def adapted(name: str, *, update: bool, repeats: int = 1, runs: int | None = None) -> Adapted:
    """The study ``name`` (a `python -m bench` subcommand other than hostile and reliability).

    Args:
        name: all, table1, floor, w5, scale, migrate, what-if, flow, subjects or peers.
        update: rewrite its section of BENCHMARKS.md (all: the whole page and its charts).
        repeats: floor only: how many times the comparison runs.
        runs: scale only: runs waiting (None: the configuration's).
    """
    studies: dict[str, tuple[Only, Callable[[dict[str, Any]], str | None]]] = {
        "all": (lambda q, s, u: full.run(q, out_dir=RESULTS, update_benchmarks=u), lambda r: None),
        "table1": (
            lambda q, s, u: table1_cli.table1_only(q, s, out_dir=RESULTS, update_benchmarks=u),
            _table1_text,
        ),
        "floor": (lambda q, s, u: full.floor_only(q, repeats, out_dir=RESULTS), lambda r: None),
        "w5": (lambda q, s, u: full.w5_only(out_dir=RESULTS, update_benchmarks=u), full._w5_section),
        "scale": (lambda q, s, u: full.scale_only(q, runs, out_dir=RESULTS, update_benchmarks=u), _scale_text),
        "migrate": (
            lambda q, s, u: migration_cli.migration_only(q, s, update_benchmarks=u),
            migration_cli.migration_section,
        ),
        "what-if": (lambda q, s, u: what_if_cli.what_if_only(q, s, update_benchmarks=u), what_if_cli.what_if_section),
        "flow": (lambda q, s, u: flow_cli.flow_only(q, s, update_benchmarks=u), flow_cli.flow_section),
        "subjects": (lambda q, s, u: subject_bench.subjects_only(q, s, update_benchmarks=u), subject_bench.section),
        "peers": (_peers, _peers_text),
    }
    only, text = studies[name]
    return Adapted(name, only, text, update)
