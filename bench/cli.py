"""`make bench` (`python -m bench`): run the benchmark on the embedded stack, print and save results.

Longer than most modules because it is the one command that runs every section, alone or
together, and splices each section's text into BENCHMARKS.md; the sections' own work lives in
their modules (`bench.migration_cli`, `bench.what_if_cli`, `bench.flow_cli`, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from bench import flow_cli, migration_cli, table1_cli, what_if_cli
from bench.peers.peers_report import END as PEERS_END
from bench.peers.peers_report import START as PEERS_START
from bench.reliability import report as reliability_report
from bench.report import file_stamp, floor_spread, floor_table, machine, markdown, write
from bench.runner import Bench, BenchConfig
from bench.section_files import publish_section
from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack, private_settings, reusable

REPO = Path(__file__).resolve().parent.parent
# Markers of the section `make hostile` writes (bench/hostile.py).
HOSTILE_START, HOSTILE_END = "<!-- hostile:start -->", "<!-- hostile:end -->"
# ... and of its event-loop part (bench/hostile_loop.py).
HOSTILE_LOOP_START, HOSTILE_LOOP_END = "<!-- hostile-loop:start -->", "<!-- hostile-loop:end -->"
# ... and of its model-answer part (bench/hostile_llm.py).
HOSTILE_LLM_START, HOSTILE_LLM_END = "<!-- hostile-llm:start -->", "<!-- hostile-llm:end -->"
PEERS_MARKERS = PEERS_START, PEERS_END  # W6's section (bench/peers), from `make bench PEERS=1`


@contextlib.asynccontextmanager
async def bench_stack() -> AsyncIterator[tuple[Settings, DevStack | None]]:
    """The running stack if one answers (`make up`), else a private one started and stopped here."""
    settings = Settings.from_env().with_changes(worker={"metrics_bind": ""})
    if await reusable(settings):
        yield settings, None
        return
    settings = private_settings(Path(tempfile.mkdtemp(prefix="dsmo-bench-")), settings)
    stack = DevStack(settings)
    await stack.up(timeout=90)
    try:
        yield settings, stack
    finally:
        stack.down()


async def run(quick: bool, *, out_dir: Path, update_benchmarks: bool = False, scale: bool = True) -> dict[str, Any]:
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
    page = REPO / "BENCHMARKS.md" if update_benchmarks else None
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
    paths = write(results, out_dir, charts_dir=REPO / "docs" / "bench" if update_benchmarks else None)
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
        page = REPO / "BENCHMARKS.md"
        # The reliability and hostile-input sections come from their own commands; a bench run
        # keeps them as they are.
        old = page.read_text() if page.exists() else ""
        new_page = benchmarks_page(results)
        for start, end in (
            (reliability_report.START, reliability_report.END),
            (HOSTILE_START, HOSTILE_END),
            (HOSTILE_LOOP_START, HOSTILE_LOOP_END),
            (HOSTILE_LLM_START, HOSTILE_LLM_END),
            what_if_cli.MARKERS,
            flow_cli.MARKERS,
            PEERS_MARKERS,
        ):
            kept = reliability_report.existing(old, start, end)
            if kept:
                new_page = reliability_report.splice(new_page, kept, start, end)
        w5_section = _w5_section(results)
        if w5_section:
            new_page = reliability_report.splice(new_page, w5_section, *_w5_markers())
        new_page = _with_scale(new_page, old, results)
        new_page = what_if_cli.with_section(migration_cli.with_section(new_page, results), results)
        page.write_text(flow_cli.with_section(new_page, results))


def _with_scale(page: str, old: str, results: dict[str, Any]) -> str:
    """``page`` with this run's scale section, or the one ``old`` had if the test did not run."""
    from bench.scale_report import END, START, scale_section

    section = scale_section(results) or reliability_report.existing(old, START, END)
    return reliability_report.splice(page, section, START, END) if section else page


def _w5_markers() -> tuple[str, str]:
    from bench.w5_report import W5_END, W5_START

    return W5_START, W5_END


def update_w5_section(results: dict[str, Any]) -> None:
    """Replace only BENCHMARKS.md's W5 section (the rest stays from the run that wrote it)."""
    from bench.w5_report import W5_END, W5_START

    section = _w5_section(results)
    if section:
        page = REPO / "BENCHMARKS.md"
        page.write_text(reliability_report.splice(page.read_text(), section, W5_START, W5_END))


def main(
    quick: bool,
    update: bool,
    scale_alone: bool = False,
    floor_repeats: int = 0,
    w5_alone: bool = False,
    scale_runs: int | None = None,
) -> None:
    out_dir = REPO / "bench" / "results"
    if w5_alone:
        asyncio.run(w5_only(out_dir=out_dir, update_benchmarks=update))
    elif scale_alone:
        asyncio.run(scale_only(quick, scale_runs, out_dir=out_dir, update_benchmarks=update))
    elif floor_repeats:
        asyncio.run(floor_only(quick, floor_repeats, out_dir=out_dir))
    else:
        asyncio.run(run(quick, out_dir=out_dir, update_benchmarks=update))


@click.command(name="bench")
@click.option("--quick", is_flag=True, help="About two minutes: fewer runs, 200 waiting in the scale test.")
@click.option("--update", is_flag=True, help="Rewrite BENCHMARKS.md and docs/bench/*.png from this run.")
@click.option("--scale-only", is_flag=True, help="Run only the scale test and its section (SCALE=1, or SCALE=N runs).")
@click.option(
    "--scale-runs",
    type=click.IntRange(min=100),
    default=None,
    metavar="N",
    help="With --scale-only: N runs waiting (default: 10,000; 200 with --quick).",
)
@click.option("--w5-only", is_flag=True, help="Run only W5 (LLM-bound), merged into the latest results.")
@click.option("--migrate-only", "migrate", is_flag=True, help="Run only the migration section (10,000 runs).")
@click.option("--what-if-only", "what_if", is_flag=True, help="Run only the what-if section (1,000 runs replayed).")
@click.option("--flow-only", "flow", is_flag=True, help="Run only the flow-control section (per-key concurrency).")
@click.option(
    "--subjects-only", "subjects", is_flag=True, help="Run only the data-subjects section (sealing, erasure)."
)
@click.option("--peers-only", "peers", is_flag=True, help="Run only W6: DSMO beside raw Temporal, LangGraph and DBOS.")
@click.option("--table1-only", "table1", is_flag=True, help="Run only Table 1's experiment (and its repetitions).")
@click.option(
    "--floor-only",
    "floor_repeats",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Run only the floor comparison and resume latency, N times; print each ratio's spread.",
)
def command(
    quick: bool,
    update: bool,
    scale_only: bool,
    scale_runs: int | None,
    w5_only: bool,
    migrate: bool,
    what_if: bool,
    flow: bool,
    subjects: bool,
    peers: bool,
    table1: bool,
    floor_repeats: int | None,
) -> None:
    """Reproduce the paper's Table 1 on the embedded stack and measure against raw Temporal.

    \b
    Examples:
      python -m bench --quick
      python -m bench --floor-only 3      # the targets' ratios, three times, with their spread
    """
    if scale_runs and not scale_only:
        raise click.UsageError("--scale-runs: only with --scale-only")
    if floor_repeats and (scale_only or update):
        raise click.UsageError("--floor-only: cannot be combined with --scale-only or --update")
    if migrate and (scale_only or w5_only or floor_repeats):
        raise click.UsageError("--migrate-only: cannot be combined with --scale-only, --w5-only or --floor-only")
    if what_if and (migrate or scale_only or w5_only or floor_repeats):
        raise click.UsageError("--what-if-only: cannot be combined with another --*-only option")
    if flow and (migrate or what_if or scale_only or w5_only or floor_repeats):
        raise click.UsageError("--flow-only: cannot be combined with another --*-only option")
    if subjects and (flow or migrate or what_if or scale_only or w5_only or floor_repeats):
        raise click.UsageError("--subjects-only: cannot be combined with another --*-only option")
    if peers and (subjects or flow or migrate or what_if or scale_only or w5_only or floor_repeats):
        raise click.UsageError("--peers-only: cannot be combined with another --*-only option")
    if table1 and (peers or subjects or flow or migrate or what_if or scale_only or w5_only or floor_repeats):
        raise click.UsageError("--table1-only: cannot be combined with another --*-only option")
    if table1:
        results_dir = REPO / "bench" / "results"
        asyncio.run(
            table1_cli.table1_only(quick, bench_stack, out_dir=results_dir, update_benchmarks=update, repo=REPO)
        )
    elif peers:
        from bench.peers.peers_cli import peers_only

        asyncio.run(peers_only(quick, update_benchmarks=update))
    elif subjects:
        from bench.subject_bench import subjects_only

        asyncio.run(subjects_only(quick, bench_stack, update_benchmarks=update))
    elif flow:
        asyncio.run(flow_cli.flow_only(quick, bench_stack, update_benchmarks=update))
    elif migrate:
        asyncio.run(migration_cli.migration_only(quick, bench_stack, update_benchmarks=update))
    elif what_if:
        asyncio.run(what_if_cli.what_if_only(quick, bench_stack, update_benchmarks=update))
    else:
        main(quick, update, scale_only, floor_repeats or 0, w5_only, scale_runs)
