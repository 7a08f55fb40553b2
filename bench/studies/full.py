"""`make bench` (`python -m bench all`): every section on the embedded stack, and the page they make.

Also `floor`, `w5` and `scale` alone (`python -m bench floor|w5|scale`). Longer than most modules
because the full run writes BENCHMARKS.md whole, keeping the sections other commands own; the
sections' own work lives in their modules (`bench.migration_cli`, `bench.flow_cli`, ...).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import flow_cli, migration_cli, table1_cli, what_if_cli
from bench.paths import BENCHMARKS, CHARTS
from bench.peers.peers_report import END as PEERS_END
from bench.peers.peers_report import START as PEERS_START
from bench.reliability import report as reliability_report
from bench.report import file_stamp, floor_spread, floor_table, machine, markdown, write
from bench.runner import Bench, BenchConfig
from bench.section_files import publish_section
from bench.sections import existing, splice, write_section
from bench.stack import bench_stack
from bench.studies.hostile import llm as hostile_llm
from bench.studies.hostile import loop as hostile_loop
from bench.studies.hostile import memory as hostile_memory
from dsmo.config.settings import Settings

PEERS_MARKERS = PEERS_START, PEERS_END  # W6's section (bench/peers), from `make bench PEERS=1`


async def run(quick: bool, *, out_dir: Path, update_benchmarks: bool = False, scale: bool = True) -> dict[str, Any]:
    """Every section in one run; with ``update_benchmarks``, BENCHMARKS.md and its charts rewritten."""
    config = BenchConfig() if quick else BenchConfig.full()
    async with bench_stack() as (settings, stack):
        started = time.perf_counter()
        bench = Bench(settings, config)
        results = await bench.run()
        results.update(
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            machine=machine(),
            command="make bench" + (" QUICK=1" if quick else ""),
        )
        write(results, out_dir)  # kept even if the scale test fails
        if scale:
            from bench.scale import scale_test

            print(f"scale: {config.scale_runs} waiting runs, beside as many bare workflows", flush=True)
            try:
                results["scale"] = await scale_test(settings, bench.dsmo, config.scale_runs, stack)
            except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
                print(f"scale test failed: {type(err).__name__}: {err}", flush=True)
        await migration_cli.add_migration(results, settings, bench.dsmo, config.migration_runs, out_dir)
        await what_if_cli.add_what_if(results, settings, bench.dsmo, config.what_if_runs, own_stack=stack is not None)
        await flow_cli.add_flow(results, settings, config, own_stack=stack is not None)
        await _add_w5(results, settings, bench.dsmo, batches=1 if quick else 3)
        results["seconds"] = round(time.perf_counter() - started, 1)
    finish(results, out_dir, update_benchmarks)
    return results


async def _add_w5(results: dict[str, Any], settings: Settings, dsmo: Any, *, batches: int = 3) -> None:
    from bench.llm_bound import w5

    try:
        results["w5"] = await w5(settings, dsmo, batches=batches)
    except Exception as err:  # noqa: BLE001 - report the rest of the benchmark anyway
        print(f"W5 failed: {type(err).__name__}: {err}", flush=True)


async def w5_only(*, out_dir: Path, update_benchmarks: bool) -> dict[str, Any]:
    """Run just W5 (LLM-bound); writes bench/results/w5.json and, with --update, BENCHMARKS.md's W5 section."""
    import json

    from dsmo.client.dsmo_client import DsmoClient

    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": "make bench W5=1"}
    async with bench_stack() as (settings, _):
        await _add_w5(results, settings, await DsmoClient.connect(settings))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "w5.json").write_text(json.dumps(results, indent=2, default=str))
    section = _w5_section(results)
    print(section or "W5 did not run")
    if update_benchmarks and section:
        update_w5_section(results)
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
ratios). Resume latency is the
issue's definition: from sending the event until the next action's agent starts working (B3 waits
for a response, then runs one stage), against a bare signal until a plain workflow completes.

{floor_table(results)}
"""


async def scale_only(quick: bool, runs: int | None, *, out_dir: Path, update_benchmarks: bool) -> dict[str, Any]:
    """Run just the scale test (``runs`` waiting, else the configuration's) and its section."""
    from bench.scale import scale_test
    from bench.scale_report import END, START, scale_section
    from dsmo.client.dsmo_client import DsmoClient

    config = BenchConfig() if quick else BenchConfig.full()
    count = runs or config.scale_runs
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    command = "make bench SCALE=" + (str(runs) if runs else "1") + (" QUICK=1" if quick else "")
    results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
    async with bench_stack() as (settings, stack):
        results["scale"] = await scale_test(settings, await DsmoClient.connect(settings), count, stack)
    page = BENCHMARKS if update_benchmarks else None
    publish_section(
        results, name="scale", text=scale_section(results), markers=(START, END), out_dir=out_dir, page=page
    )
    return results


async def floor_only(quick: bool, repeats: int, *, out_dir: Path) -> dict[str, Any]:
    """The floor comparison and resume latency only, ``repeats`` times: the targets' spread."""
    import json

    config = BenchConfig() if quick else BenchConfig.full()
    started, stamp = time.perf_counter(), datetime.now(UTC).isoformat(timespec="seconds")
    async with bench_stack() as (settings, _):
        measured = await Bench(settings, config).run_against_floor(repeats)
    results: dict[str, Any] = {
        "config": {k: v for k, v in vars(config).items()},
        "repeats": measured,
        "started_at": stamp,
        "machine": machine(),
        "command": f"make bench FLOOR={repeats}" + (" QUICK=1" if quick else ""),
        "seconds": round(time.perf_counter() - started, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"floor-{file_stamp(stamp)}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"### Against the raw-Temporal floor, {repeats} repeats ({results['seconds']} s, {results['machine']})\n")
    print(floor_spread(measured))
    print(f"\nresults: {path}")
    return results


def _w5_section(results: dict[str, Any]) -> str | None:
    from bench.w5_report import w5_section

    if not results.get("w5"):
        return None
    return w5_section(results["w5"], results["command"], results["started_at"], results["machine"])


def _scale_text(results: dict[str, Any]) -> str | None:
    from bench.scale_report import scale_section

    return scale_section(results)


def finish(results: dict[str, Any], out_dir: Path, update_benchmarks: bool) -> None:
    paths = write(results, out_dir, charts_dir=CHARTS if update_benchmarks else None)
    text = markdown(results)
    print(text)
    sections = (
        migration_cli.migration_section(results),
        what_if_cli.what_if_section(results),
        flow_cli.flow_section(results),
        _w5_section(results),
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
        ):
            kept = existing(old, start, end)
            if kept:
                new_page = splice(new_page, kept, start, end)
        w5_section = _w5_section(results)
        if w5_section:
            new_page = splice(new_page, w5_section, *_w5_markers())
        new_page = _with_scale(new_page, old, results)
        new_page = what_if_cli.with_section(migration_cli.with_section(new_page, results), results)
        page.write_text(flow_cli.with_section(new_page, results))


def _with_scale(page: str, old: str, results: dict[str, Any]) -> str:
    """``page`` with this run's scale section, or the one ``old`` had if the test did not run."""
    from bench.scale_report import END, START, scale_section

    section = scale_section(results) or existing(old, START, END)
    return splice(page, section, START, END) if section else page


def _w5_markers() -> tuple[str, str]:
    from bench.w5_report import W5_END, W5_START

    return W5_START, W5_END


def update_w5_section(results: dict[str, Any]) -> None:
    """Replace only BENCHMARKS.md's W5 section (the rest stays from the run that wrote it)."""
    from bench.w5_report import W5_END, W5_START

    section = _w5_section(results)
    if section:
        write_section(section, (W5_START, W5_END))
