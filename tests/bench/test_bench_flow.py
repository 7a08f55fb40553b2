"""The flow-control section of `make bench` runs end to end at a tiny size and its report is computed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.runner import BenchConfig
from bench.studies.flow.flow_bench import SIDES, flow_bench
from bench.studies.flow.flow_cli import with_section
from bench.studies.flow.flow_report import END, START, save
from dsmo.config.settings import Settings

pytestmark = pytest.mark.integration

RUNS, HANDOVER = 8, 4
CONFIG = BenchConfig(flow_runs=RUNS, flow_rounds=2, flow_seconds=1.0, flow_handover_runs=HANDOVER, w4_concurrency=4)


async def test_keyed_and_plain_runs_one_locks_ceiling_and_handover_are_measured(
    stack_settings: Settings, tmp_path: Path
) -> None:
    figures = await flow_bench(stack_settings.with_changes(worker={"metrics_bind": ""}), CONFIG, progress=print)

    throughput = figures["throughput"]
    assert throughput["rounds"] == 2 and throughput["batch"] == RUNS // 2
    for side in SIDES:
        measured = throughput[side]
        # Every run completed, and with a key of its own each started running at once.
        assert measured["runs"] == RUNS and measured["statuses"] == {"completed": RUNS}
        assert measured["started_as"] == {"running": RUNS}
        assert len(measured["runs_per_second_per_round"]) == 2 and measured["runs_per_second"] > 0
        assert {"python", "temporal"} <= set(measured["cpu_ms_per_run"])
        latency = figures["latency"][side]
        assert latency["runs"] == RUNS and {"p50", "p95"} <= set(latency["to_first_agent"])
        assert "STAGE_STARTED" in latency["trail_sample"]
    assert throughput["ratio"] > 0
    # Only the keyed runs took a slot.
    assert "SLOT_TAKEN" in figures["latency"]["keyed"]["trail_sample"]
    assert "SLOT_TAKEN" not in figures["latency"]["plain"]["trail_sample"]

    ceiling = figures["ceiling"]
    for side in ("one_lock", "lock_per_start"):
        drive = ceiling[side]
        assert drive["starts"] > 0 and drive["errors"] == {} and drive["starts_per_second"] > 0
        assert drive["started_as"] == {"running": drive["starts"]}  # the limit is never reached
        assert drive["statuses"] == {"completed": drive["starts"]}
    lock = ceiling["one_lock"]["lock"]
    assert lock["executions"].get("RUNNING") == 1 and lock["current_history_events"] > 0
    assert ceiling["ratio"] > 0

    handover = figures["handover"]
    # One key, limit 1: the first start ran at once, the others (started together) mostly waited
    # in line; every run completed.
    assert sum(handover["started_as"].values()) == HANDOVER and handover["started_as"].get("running", 0) >= 1
    assert handover["statuses"] == {"completed": HANDOVER} and handover["runs_per_second"] > 0

    saved = json.loads(save(figures, tmp_path, "2026-11-26T07:00:00+00:00").read_text())
    assert saved["throughput"]["ratio"] == throughput["ratio"]
    results = {"flow_control": saved, "command": "test", "started_at": "now", "machine": "here"}
    page = with_section("# Benchmarks\n", results)
    assert page.startswith("# Benchmarks") and START in page and END in page
    assert "| Runs per second (median of 2 rounds) |" in page and "| Starts per second |" in page
    assert "| Runs per second one key serves |" in page
    assert f"| Runs that completed / started running at once | {RUNS} completed / {RUNS} running |" in page
    assert with_section(page, results) == page  # spliced in place, not appended twice
