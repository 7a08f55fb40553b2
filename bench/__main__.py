"""`make bench`, `make hostile`, `make reliability`: `python -m bench <study> [options]`.

The one command of the harness. Each subcommand runs one study (`bench.studies.Study`), prints it,
and with `--update` rewrites its section of BENCHMARKS.md (`all` rewrites the whole page, keeping
the sections the other studies own). One study per call: two at once is a usage error.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

import click

from bench.paths import CHARTS, RESULTS
from bench.sections import write_section
from bench.stack import bench_stack
from bench.studies import Study

QUICK = click.option("--quick", is_flag=True, help="Fewer and smaller runs (about two minutes for `all`).")
UPDATE = click.option("--update", is_flag=True, help="Rewrite this study's section of BENCHMARKS.md.")


def execute(study: Study, *, quick: bool = False, update: bool = False) -> int:
    """Run ``study`` on the bench's stack; with ``update``, splice its section. The exit status.

    Args:
        study: the study to run.
        quick: its quick variant.
        update: rewrite its section of BENCHMARKS.md (for studies that name their markers;
            `all` rewrites the whole page itself).

    Returns:
        1 when the study reports a bound not met (``results["failed"]``), else 0.
    """
    results = asyncio.run(study.run(quick, bench_stack))
    text = study.section(results) if update and study.markers else None
    if text and study.markers:
        write_section(text, study.markers)
        print(f"\nBENCHMARKS.md: the {study.name} section rewritten")
    return 1 if results.get("failed") else 0


@click.group(name="bench")
def main() -> None:
    """Measure DSMO on the embedded stack (the running one, else a private one): one study a call.

    \b
    Examples:
      python -m bench all --quick            # make bench QUICK=1
      python -m bench floor --repeats 3      # make bench FLOOR=3
      python -m bench migrate --update       # make bench MIGRATE=1 UPDATE=1
      python -m bench hostile --update       # make hostile
    """


# Each subcommand's study: its module and class, imported only when it runs (so `--help` stays
# quick, and only `peers` and `tools` load LangGraph, only `peers` DBOS).
STUDIES = {
    "all": ("bench.studies.full", "All"),
    "table1": ("bench.studies.table1.study", "Table1"),
    "floor": ("bench.studies.floor.study", "Floor"),
    "w5": ("bench.studies.w5.study", "W5"),
    "scale": ("bench.studies.scale.study", "Scale"),
    "migrate": ("bench.studies.migrate.study", "Migrate"),
    "what-if": ("bench.studies.what_if.study", "WhatIf"),
    "flow": ("bench.studies.flow.study", "Flow"),
    "subjects": ("bench.studies.subjects.study", "Subjects"),
    "peers": ("bench.studies.peers.study", "Peers"),
    "tools": ("bench.studies.tools.study", "Tools"),
    "live": ("bench.studies.live.study", "Live"),
}


def make_study(name: str, *, update: bool = False, **options: object) -> Study:
    """The study behind the subcommand ``name`` (one of `STUDIES`).

    Args:
        name: the subcommand.
        update: `all`: rewrite the whole page and its charts; `table1`: draw the charts its
            section shows.
        options: the study's own options (floor: ``repeats``; scale: ``runs``).

    Returns:
        The study, ready for `execute`.
    """
    module, cls = STUDIES[name]
    if name == "all":
        options["update"] = update  # it writes BENCHMARKS.md whole, not one section
    elif name == "table1" and update:
        options["charts_dir"] = CHARTS  # the section shows these charts: drawn from the same results
    made: Study = getattr(importlib.import_module(module), cls)(**options)
    return made


def _study_command(name: str, summary: str) -> None:
    @main.command(name=name, help=f"{summary}\n\n\b\nExample:\n  python -m bench {name} --quick --update")
    @QUICK
    @UPDATE
    def command(quick: bool, update: bool) -> None:
        execute(make_study(name, update=update), quick=quick, update=update)


for _name, _summary in (
    ("all", "Every section (Table 1, the raw-Temporal floor, scale, migration, what-if, flow, W5); `make bench`."),
    ("table1", "Table 1's experiment alone: three repetitions, each its own seed (TABLE1=1)."),
    ("w5", "W5 (LLM-bound stages) against raw Temporal with and without the same store writes (W5=1)."),
    ("migrate", "Migrating 10,000 waiting runs to a new version in one batch; 300 with --quick (MIGRATE=1)."),
    ("what-if", "The what-if replay of 1,000 ended runs against a candidate version; 100 with --quick (WHATIF=1)."),
    ("flow", "Flow control: W4 runs with a per-key limit against the same without, one lock's ceiling (FLOW=1)."),
    ("subjects", "Data subjects: W1 and W4 with and without a subject, erasing a subject's runs (SUBJECTS=1)."),
    ("peers", "W6: DSMO beside raw Temporal, LangGraph and DBOS on one graph, then the crash ledger (PEERS=1)."),
    ("tools", "A tool-using agent's cost per turn, DSMO beside LangGraph + Postgres; 5 turns with --quick (TOOLS=1)."),
    (
        "live",
        "Live streams: 1,000 runs followed by 100 SSE readers beside the same runs unread; 100 with --quick (LIVE=1).",
    ),
):
    _study_command(_name, _summary)


@main.command()
@QUICK
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True, help="Times to measure.")
def floor(quick: bool, repeats: int) -> None:
    """The comparison with raw Temporal and the resume latency only, with each ratio's spread (FLOOR=N).

    \b
    Example:
      python -m bench floor --repeats 3
    """
    execute(make_study("floor", repeats=repeats), quick=quick)


@main.command()
@QUICK
@UPDATE
@click.option("--runs", type=click.IntRange(min=100), default=None, metavar="N", help="Runs waiting (10,000).")
def scale(quick: bool, update: bool, runs: int | None) -> None:
    """The scale test: many runs waiting on one worker, beside as many bare workflows (SCALE=1 or N).

    \b
    Example:
      python -m bench scale --runs 100000 --update
    """
    execute(make_study("scale", runs=runs), quick=quick, update=update)


@main.command()
@UPDATE
@click.option("--part", type=click.Choice(["memory", "loop", "llm"]), multiple=True, help="Only these (default: all).")
@click.option("--out", type=click.Path(path_type=Path), default=RESULTS, show_default=True, help="Results folder.")
def hostile(update: bool, part: tuple[str, ...], out: Path) -> None:
    """`make hostile`: entry points' peak memory under hostile inputs, an event-loop blocker, hostile model answers.

    Parts run in order; one whose bound fails stops the rest and exits 1.

    \b
    Example:
      python -m bench hostile --part loop
    """
    from bench.studies.hostile.study import PARTS
    from bench.studies.hostile.study import hostile as hostile_study

    for name in part or PARTS:
        if execute(hostile_study(name, out), update=update):
            sys.exit(1)


@main.command()
@UPDATE
@click.option("--runs", type=int, default=300, show_default=True, help="Runs in the worker and Temporal scenarios.")
@click.option("--outage-runs", type=int, default=100, show_default=True, help="Runs in the S3 scenario.")
@click.option("--outage", type=float, default=30.0, show_default=True, help="Seconds the S3 store stays down.")
def reliability(update: bool, runs: int, outage_runs: int, outage: float) -> None:
    """`make reliability`: crash, restart and storage-fault scenarios at larger counts than CI.

    \b
    Example:
      python -m bench reliability --runs 50
    """
    from bench.reliability.study import Reliability
    from dsmo.runtime.exits import hard_exit

    code = execute(Reliability(runs, outage_runs, outage), update=update)
    # The Temporal client's threads can abort a normal interpreter exit (see hard_exit).
    hard_exit(code)


if __name__ == "__main__":
    main()
