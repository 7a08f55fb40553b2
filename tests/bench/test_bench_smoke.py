"""The benchmark harness runs end to end on a tiny workload and its report is computed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench.paired import RATES, draw, inputs_for, trajectory
from bench.report import floor_spread, markdown
from bench.runner import Bench, BenchConfig
from bench.studies.full import benchmarks_page
from bench.studies.table1 import table1_cli
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack, private_settings
from dsmo.runtime.storage import artifact_store
from tests.polling import until

pytestmark = pytest.mark.integration

FLOOR_IO_PREFIXES = ("artifacts/bench-floor-io/", "audit/bench-floor-io/")


def crashes_first(workload: str, seed: int, inputs: int) -> bool:
    """Whether one of the workload's inputs meets a crash on the first attempt of a stage it reaches."""
    for item in inputs_for(workload, inputs, seed):
        for stage in trajectory(workload, item.route):
            fault = draw(RATES[workload], seed, item.input_id, stage, 1)
            if fault == "crash":
                return True
            if fault is not None:  # a permanent failure ends the run; other faults change later attempts
                break
    return False


def seed_with_crashes(inputs: int) -> int:
    return next(seed for seed in range(5000) if crashes_first("W3", seed, inputs) and crashes_first("W4", seed, inputs))


# The whole bench at its smallest, on a stack of its own (Table 1 kills its Temporal server): four
# workloads in four modes meeting real crashes and server restarts, each queue mode draining its
# redeliveries, then the floor. About 4 minutes on two shared cores.
@pytest.mark.timeout(900)
async def test_bench_runs_on_a_tiny_workload(tmp_path: Path) -> None:
    inputs = 2
    config = BenchConfig(
        seed=seed_with_crashes(inputs),
        inputs=inputs,
        replays=1,
        concurrency=2,
        w4_runs=4,
        w4_inputs=inputs,
        w4_concurrency=4,
        artifact_sizes=(1_000,),
        resume_samples=2,
        paired_waves=1,
        drain_quiet=0.5,  # a tiny workload's stages take milliseconds
    )
    config.ambiguity = 0.0  # B2 follows the graph: it reaches the crash its inputs draw, as the others do
    # The production worker configuration: no workflow sandbox, the artifact cache on.
    settings = private_settings(tmp_path / "stack").with_changes(
        worker={"metrics_bind": "", "sandbox": False}, store={"cache_mb": 16}
    )
    stack = DevStack(settings)
    await stack.up(timeout=120)
    try:
        bench = Bench(settings, config, progress=lambda _: None, devstack=stack)
        results = await bench.run()
        check_table1(results, config)
        check_floor(results, bench)  # reads the stack's store
        await visible_floor_runs(await DsmoClient.connect(settings), bench.queue + "-modes", FLOOR_RUNS)
    finally:
        stack.down()


def check_table1(results: dict[str, Any], config: BenchConfig) -> None:
    modes = ("B3", "B1", "B1p", "B2")
    for workload in ("W1", "W2", "W3", "W4"):
        measured = results["workloads"][workload]
        for mode in modes:
            summary = measured[mode]["summary"]
            assert summary["runs"] == 2 * config.inputs and summary["latency_p50_s"] > 0
            assert len(measured[mode]["records"]) == 2 * config.inputs
            faults = measured[mode]["faults"]
            if workload in ("W3", "W4"):
                # Every run ended despite the kills and a restart of its mode's server.
                server = "temporal" if mode == "B3" else "postgres"
                assert faults["server_restarts"] == 1 and faults["restart"]["server"] == server, (workload, mode)
                assert faults["restart"]["down_s"] > 0
                # The crash each input drew killed a real process: B3's worker, or a consumer.
                assert faults["kills"] >= 1 and faults["deaths"] >= faults["kills"], (workload, mode, faults)
            else:
                assert faults == {"kills": 0, "deaths": 0, "server_restarts": 0, "restart": None}
        # Paired: every mode had the same inputs, and every draw all of them reached met one fault.
        assert measured["B3"]["checksums"] == measured["B1"]["checksums"] == measured["B2"]["checksums"]
        assert measured["B1p"]["checksums"] == measured["B3"]["checksums"]
        assert measured["pairing"]["shared"] >= 4 and set(measured["pairing"]["faults"]) == set(modes)
        assert measured["B3"]["summary"]["orphans_lineage_per_run"] == 0.0
    assert all(results["faults"][0][mode]["server_restarts"] == 2 for mode in modes)
    for mode in ("B3", "B1", "B1p"):
        # W1 meets only permanent failures (no ambiguity in B1): a run succeeds exactly when none
        # struck a first attempt of its path, and then took the graph's path.
        for record in results["workloads"]["W1"][mode]["records"]:
            drawn = [draw(RATES["W1"], config.seed, record["input_id"], stage, 1) for stage in "ABC"]
            assert record["success"] == ("permanent" not in drawn) == (record["dlq"] == 0), record
            assert record["valid_path"] == record["success"] and record["orphans_lineage"] == 0
    assert len(results["repetitions"]) == 1 and results["repetitions"][0]["B3"]["latency_p50_s"] > 0
    # The retry timer probe ran on the stack: a timer never fires before it is due.
    assert results["timer"]["probes"] == 5 and results["timer"]["fired_s"] >= results["timer"]["asked_s"] == 0.2


# The search-attribute floor's runs: 12 W1 + 24 W4 (six rounds a side, a batch of 2 and of 4).
FLOOR_RUNS = 2 * 6 + 4 * 6


def check_floor(results: dict[str, Any], bench: Bench) -> None:
    assert results["floor"]["W1"]["p50"] > 0 and results["floor"]["ratios"]["w1_p50"] > 0
    # Paired batches are at least a wave of each shape's concurrency, in six rounds a side (one
    # per side: each runs in each place of a round once).
    assert results["floor"]["batch"] == {"W1": 2, "W4": 4} and results["floor"]["rounds"] == {"W1": 6, "W4": 6}
    assert len(results["floor"]["b3"]["W4"]["throughput_per_round"]) == 6
    assert len(results["floor"]["b3_local"]["W4"]["throughput_per_round"]) == 6
    # Where each run's CPU went, for every side: this process and the two servers, found by port.
    for side in (
        results["floor"]["b3"],
        results["floor"],
        results["floor"]["floor_io"],
        results["floor"]["floor_io_sa"],
        results["floor"]["b3_local"],
        results["floor"]["floor_io_local"],
    ):
        spent = side["W4"]["cpu_ms_per_run"]
        assert set(spent) == {"python", "temporal", "s3"} and spent["python"] > 0 and spent["temporal"] > 0
    # The three artifact-I/O floors did the S3 work of a DSMO run: 12 W1 + 24 W4 runs each, each
    # run an input, three stage outputs and a trail file (CPU times tick at 10 ms: too coarse to
    # compare here); the second kept DSMO's search attributes, its final status upserted; the
    # third ran its stages as local activities. The stack is the test's own: nothing else wrote.
    written = {prefix: len(bench.store.list_uris(prefix)) for prefix in FLOOR_IO_PREFIXES}
    assert written == {"artifacts/bench-floor-io/": 3 * FLOOR_RUNS * 4, "audit/bench-floor-io/": 3 * FLOOR_RUNS}
    assert all(ratio > 0 for ratio in results["floor"]["io_ratios"].values())
    assert results["floor"]["ratios"]["w1_p50_local"] > 0 and results["floor"]["ratios"]["w4_throughput_local"] > 0
    assert results["resume"]["ratio"] > 0 and "1000" in results["history_bytes"]
    assert results["resume"]["inbox_p50"] > 0  # a measurement: its bounds are `make bench`'s
    results["started_at"] = "now"
    table = markdown(results)
    assert "SPS (the sequence of states" in table and "0.7775 / 0.775 / 0.56" in table
    assert "not a prefix of the accepted trajectory) | 0.000 [≤ " in table  # B3's unlinked, the rule of three
    assert "Paired, from what the agents drew:" in table and "no draw met two faults" in table
    # The page: Table 1 between the markers `make bench TABLE1=1` replaces, then the floor.
    page = benchmarks_page({**results, "seconds": 1.0, "command": "make bench", "machine": "here"})
    section = page.split(table1_cli.START, 1)[1].split(table1_cli.END, 1)[0]
    assert "## Table 1: the paper's experiment" in section and "3.8% of the" in section
    assert "### Table 1 (W1-W4" in section and "Raw Temporal floor" not in section
    assert "## Against the raw-Temporal floor" in page.split(table1_cli.END, 1)[1]
    assert "| Temporal server |" in table and "| S3 store |" in table
    assert "| W4 CPU ms per run (whole stack) |" in table
    assert "| W1 latency p50 (s), B3, local stages / floor + I/O, local activities |" in table
    assert "local activities doing the same work" in page
    assert "| Resume, event kept in the inbox: wait begins → next action started p50 (s) |" in table
    assert "| Where B3's overhead goes |" in table and "| W4 CPU ms per run, S3 store |" in table


async def visible_floor_runs(dsmo: DsmoClient, queue: str, runs: int) -> None:
    """The search-attribute floor's runs are in visibility as DSMO runs are: completed, by agent.
    Visibility trails the histories by a moment: wait for it (a hang guard, not a target)."""
    query = f'TaskQueue = "{queue}" AND AgentName = "bench-floor-io" AND AgentExecutionStatus = "completed"'

    async def listed() -> bool:
        return (await dsmo.temporal.count_workflows(query)).count == runs

    await until(listed, f"visibility lists the {runs} floor runs as DSMO runs, completed")


async def test_floor_only_repeats_the_target_ratios(stack_settings: Settings) -> None:
    config = BenchConfig(inputs=1, replays=1, concurrency=2, w4_runs=4, w4_concurrency=4, resume_samples=2)
    config.paired_rounds, config.paired_waves = 2, 1
    settings = stack_settings.with_changes(worker={"metrics_bind": "", "sandbox": False}, store={"cache_mb": 16})
    repeats = await Bench(settings, config, progress=lambda _: None).run_against_floor(2)
    assert len(repeats) == 2
    for measured in repeats:
        assert measured["floor"]["rounds"] == {"W1": 2, "W4": 2} and measured["resume"]["ratio"] > 0
    table = floor_spread(repeats)
    assert "| W4 throughput, B3 / floor |" in table and "of 2 |" in table
    assert "| W4 throughput, B3 / (floor + artifact I/O) |" in table
    assert "| W1 latency p50, B3 local stages / (floor + I/O, local activities) |" in table


async def test_w5_runs_every_contender_in_tiny_batches_with_held_batches(
    stack_settings: Settings, dsmo: DsmoClient
) -> None:
    from bench.studies.w5.llm_bound import CONTENDERS, THREAD_POOL, w5
    from bench.studies.w5.w5_report import w5_section

    store = artifact_store(stack_settings)
    written_before = len(store.list_uris("artifacts/bench-w5-floor/"))
    measured = await w5(stack_settings.with_changes(worker={"metrics_bind": ""}), dsmo, runs=6, latency=0.2, batches=1)
    # The reference with the writes wrote each call's record and output: 6 runs in a batch, 6 held.
    assert len(store.list_uris("artifacts/bench-w5-floor/")) - written_before == 2 * 12
    assert list(measured["modes"]) == [contender.name for contender in CONTENDERS]
    for figures in measured["modes"].values():
        # Times from each run's history: every stage took at least the model's latency.
        assert figures["completed"] == 6 and figures["model_calls"] == 6 and figures["batches"] == 1
        assert figures["stage_mean_seconds"] >= 0.2 and 0 < figures["ratio_to_ideal"] <= 1
        assert 0 < figures["ratio_all_in_flight"] <= figures["ratio_to_ideal"]
        assert 0 < figures["mean_in_flight"] <= 6 and figures["peak_in_flight"] <= 6
    section = w5_section(measured, "test", "now", "here")
    assert section.startswith("<!-- w5:start -->")
    assert "| Runs completed | 6 of 6 | 6 of 6 | 6 of 6 | 6 of 6 |" in section
    assert "Batches of 6 runs" in section and "1 batches per contender" in section
    # The held batches: the server answered nothing until all 6 calls were in flight on the one worker.
    assert THREAD_POOL not in measured["held"] and len(measured["held"]) == 3
    for held in measured["held"].values():
        assert held["peak_in_flight"] == 6 and held["released"] and held["completed"] == 6
        assert held["last_commit_seconds"] >= held["mean_commit_seconds"] >= 0.2
        assert 0 < held["ratio_by_last"] <= held["ratio_to_ideal"] <= 1
    assert "| Peak model calls in flight | 6 | 6 | 6 |" in section


async def test_the_live_study_follows_every_run_to_its_end_and_prices_a_stream(
    stack_settings: Settings, tmp_path: Path
) -> None:
    from bench.studies.live.live_report import END, START
    from bench.studies.live.study import Live

    @contextlib.asynccontextmanager
    async def stack() -> AsyncIterator[tuple[Settings, DevStack | None]]:
        yield stack_settings.with_changes(worker={"metrics_bind": ""}), None

    study = Live(out_dir=tmp_path, runs=2, readers=2, delay="1s")
    results = await study.run(True, stack)

    live = results["live"]
    assert not results["failed"] and live["runs"] == 2 and live["readers"] == 2
    streams = live["streams"]
    # Every stream reached its end, each id once and the trail's events in order; two at once.
    assert streams["streams"] == streams["reached_end"] == 2 and streams["with_problems"] == 0
    assert streams["peak_open"] == 2 and streams["per_stream_by_kind"]["end"] == 1
    # Six progress reports a run (four, then two), and the trail's events between them.
    assert streams["per_stream_by_kind"]["progress"] == 6 and streams["per_stream_by_kind"]["event"] >= 6
    assert streams["event_lag_ms"]["p50"] is not None and streams["progress_lag_ms"]["p50"] is not None
    costs = live["costs"]
    assert {"worker", "temporal", "python", "total"} <= set(costs["cpu_ms_per_run"])
    assert costs["cpu_ms_per_run"]["total"]["followed_ms"] > costs["cpu_ms_per_run"]["worker"]["followed_ms"]
    assert set(costs["cpu_ms_per_run"]["worker"]) == {"quiet_ms", "followed_ms", "added_ms", "ratio"}
    assert costs["ingress"]["cpu_ms_per_stream"] > 0 and costs["ingress"]["rss_peak_kib"] > 0
    assert costs["worker_rss_peak_kib"]["quiet"] > 0 and costs["worker_rss_peak_kib"]["followed"] > 0
    section = study.section(results)
    assert section is not None and section.startswith(START) and section.endswith(END)
    assert "| worker |" in section and "| ingress (`dsmo serve`) |" in section and "| **all of them** |" in section
    assert [path.name for path in tmp_path.glob("live-*.json")]
