"""`make bench` (`python -m bench all`): every section on the embedded stack, and the page they make.

Longer than most modules because the full run writes BENCHMARKS.md whole, keeping the sections
other commands own; the sections' own work lives in their studies (`bench.studies.migrate`,
`bench.studies.flow`, ...), each of which also runs alone (`python -m bench migrate`, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.paths import BENCHMARKS, CHARTS, RESULTS
from bench.reliability import report as reliability_report
from bench.report import floor_table, machine, markdown, write
from bench.runner import Bench, BenchConfig
from bench.sections import existing, splice
from bench.stack import Stack, bench_stack
from bench.studies.flow import flow_cli
from bench.studies.hostile import llm as hostile_llm
from bench.studies.hostile import loop as hostile_loop
from bench.studies.hostile import memory as hostile_memory
from bench.studies.live import live_report
from bench.studies.migrate import migration_cli
from bench.studies.peers.peers_report import END as PEERS_END
from bench.studies.peers.peers_report import START as PEERS_START
from bench.studies.table1 import table1_cli
from bench.studies.tools import tools_report
from bench.studies.w5.study import MARKERS as W5_MARKERS
from bench.studies.w5.study import add_w5, w5_text
from bench.studies.what_if import what_if_cli

PEERS_MARKERS = PEERS_START, PEERS_END  # W6's section (bench/studies/peers), from `make bench PEERS=1`


async def run(quick: bool, *, out_dir: Path, update_benchmarks: bool = False, scale: bool = True) -> dict[str, Any]:
    """Every section in one run; with ``update_benchmarks``, BENCHMARKS.md and its charts rewritten."""
    config = BenchConfig() if quick else BenchConfig.full()
    async with bench_stack() as (settings, stack):
        started = time.perf_counter()
        bench = Bench(settings, config, devstack=stack)
        results = await bench.run()
        results.update(
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            machine=machine(),
            command="make bench" + (" QUICK=1" if quick else ""),
        )
        write(results, out_dir)  # kept even if the scale test fails
        if scale:
            from bench.studies.scale.scale import scale_test

            print(f"scale: {config.scale_runs} waiting runs, beside as many bare workflows", flush=True)
            try:
                results["scale"] = await scale_test(settings, bench.dsmo, config.scale_runs, stack)
            except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
                print(f"scale test failed: {type(err).__name__}: {err}", flush=True)
        await migration_cli.add_migration(results, settings, bench.dsmo, config.migration_runs, out_dir)
        await what_if_cli.add_what_if(results, settings, bench.dsmo, config.what_if_runs, own_stack=stack is not None)
        await flow_cli.add_flow(results, settings, config, own_stack=stack is not None)
        await add_w5(results, settings, bench.dsmo, batches=1 if quick else 3)
        results["seconds"] = round(time.perf_counter() - started, 1)
    finish(results, out_dir, update_benchmarks)
    return results


def _rounds(results: dict[str, Any]) -> str:
    rounds, batches = results["floor"].get("rounds", 1), results["floor"].get("batch", {})
    if isinstance(rounds, dict):
        return ", ".join(
            f"{shape}: {count} of {batches[shape]} runs a side" if shape in batches else f"{shape}: {count}"
            for shape, count in rounds.items()
        )
    return str(rounds)


def benchmarks_page(results: dict[str, Any]) -> str:
    waves = results["config"].get("paired_waves", 2)
    return f"""# Benchmarks

Measured by `{results["command"]}` on {results["started_at"]} ({results["seconds"]} s), on
{results["machine"]}, against the embedded stack (Temporal dev server with SQLite, SeaweedFS).
These machines are shared and noisy: compare ratios measured in one run, not absolute figures
across runs. Reproduce with `make bench` (full) or `make bench QUICK=1` (about two minutes).

{table1_cli.START}
{table1_cli.table1_text(results)}
{table1_cli.END}

## Against the raw-Temporal floor

B3 and the raw-Temporal floor run the W1 and W4 shapes in interleaved rounds ({_rounds(results)}),
so both meet the same load on this shared machine, and so does a second floor, the floor plus the S3 requests
a DSMO run makes (the input, each later stage's read, each stage's write-once output, a trail
file), which splits B3's overhead into artifact I/O and orchestration, and a third, that floor
plus the search attributes every DSMO run keeps (three set at start, the final status upserted
at the end), which tells the contract's visibility writes apart (the B3 column there is those
runs; each batch is at least {waves} waves of the shape's concurrency, so throughput is a
sustained rate; throughput is the median over rounds, its ratio the median of the rounds'
ratios). Two more sides run the stages as Temporal local activities: B3 with every stage local
(`local: true`; Table 1's and the B3 column's stages are regular) against the floor plus I/O on
local activities doing the same work, the comparison issue 57 sets W1 p50 ≤ 1.1x on; W4's ≥ 1.0x
is B3 with regular activities against raw Temporal. Resume latency is the
issue's definition: from sending the event until the next action's agent starts working (B3 waits
for a response, then runs one stage), against a bare signal until a plain workflow completes.

{floor_table(results)}
"""


def _scale_text(results: dict[str, Any]) -> str | None:
    from bench.studies.scale.scale_report import scale_section

    return scale_section(results)


def finish(results: dict[str, Any], out_dir: Path, update_benchmarks: bool) -> None:
    paths = write(results, out_dir, charts_dir=CHARTS if update_benchmarks else None)
    text = markdown(results)
    print(text)
    sections = (
        migration_cli.migration_section(results),
        what_if_cli.what_if_section(results),
        flow_cli.flow_section(results),
        w5_text(results),
    )
    for extra in filter(None, (*sections, _scale_text(results))):
        print("\n" + extra)
    print(f"\nresults: {paths['json']}  charts: {paths['latency_cdf'].parent}")
    if update_benchmarks:
        page = BENCHMARKS
        # The reliability and hostile-input sections come from their own commands; a bench run
        # keeps them as they are.
        old = page.read_text() if page.exists() else ""
        new_page = benchmarks_page(results)
        for start, end in (
            (reliability_report.START, reliability_report.END),
            (hostile_memory.START, hostile_memory.END),
            (hostile_loop.START, hostile_loop.END),
            (hostile_llm.START, hostile_llm.END),
            what_if_cli.MARKERS,
            flow_cli.MARKERS,
            PEERS_MARKERS,
            (tools_report.START, tools_report.END),
            (live_report.START, live_report.END),
        ):
            kept = existing(old, start, end)
            if kept:
                new_page = splice(new_page, kept, start, end)
        w5_section = w5_text(results)
        if w5_section:
            new_page = splice(new_page, w5_section, *W5_MARKERS)
        new_page = _with_scale(new_page, old, results)
        new_page = what_if_cli.with_section(migration_cli.with_section(new_page, results), results)
        page.write_text(flow_cli.with_section(new_page, results))


def _with_scale(page: str, old: str, results: dict[str, Any]) -> str:
    """``page`` with this run's scale section, or the one ``old`` had if the test did not run."""
    from bench.studies.scale.scale_report import END, START, scale_section

    section = scale_section(results) or existing(old, START, END)
    return splice(page, section, START, END) if section else page


@dataclass
class All:
    """Every section in one run (`make bench`): with ``update``, the whole page and its charts.

    It writes BENCHMARKS.md itself (so no ``markers``): the page is rebuilt, not one section.

    Attributes:
        update: rewrite BENCHMARKS.md (keeping the sections other commands own) and its charts.
        out_dir: the results folder.
    """

    update: bool = False
    out_dir: Path = field(default=RESULTS)
    name: str = "all"
    markers: tuple[str, str] | None = None

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Every section on the bench's stack (``stack`` is it: the running one, else a private one)."""
        return await run(quick, out_dir=self.out_dir, update_benchmarks=self.update)

    def section(self, results: dict[str, Any]) -> str | None:
        """None: the full run writes its page itself."""
        return None
