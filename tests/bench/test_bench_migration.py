"""The migration section of `make bench` runs end to end at a tiny size and its report is computed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.studies.migrate.migration_bench import migration_bench
from bench.studies.migrate.migration_cli import with_section
from bench.studies.migrate.migration_report import END, START, save
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings

pytestmark = pytest.mark.integration

RUNS = 5


async def test_every_waiting_run_moves_in_one_batch_beside_the_bare_updates(
    stack_settings: Settings, dsmo: DsmoClient, tmp_path: Path
) -> None:
    figures = await migration_bench(stack_settings.with_changes(worker={"metrics_bind": ""}), dsmo, RUNS)

    # Every run moved, as the batch reported it and as visibility counts it; nothing refused.
    report = figures["batch_report"]
    assert report["operation"] == "migrate" and not report["dryRun"]
    assert report["summary"]["done"] == RUNS and report["summary"]["total"] == RUNS
    assert report["summary"]["refused"] == report["summary"]["failed"] == 0
    assert report["summary"]["refusedByReason"] == {} and "WorkflowVersion" in report["query"]
    assert len(report["runs"]) == RUNS and {run["outcome"] for run in report["runs"]} == {"done"}
    assert figures["dsmo"]["moved_visible"] == RUNS  # on version 2 and waiting again
    assert figures["bare"]["moved_visible"] == RUNS  # continued as new
    assert figures["bare"]["summary"] == {"done": RUNS, "failed": 0, "total": RUNS}
    # The reference carries what a DSMO move carries, measured from a moved run's history.
    assert figures["request_bytes"] > 0 and figures["checkpoint_bytes"] > 0
    for side in ("dsmo", "bare"):
        measured = figures[side]
        assert measured["updates_timed"] == RUNS  # one timed update per run, by the same interceptor
        assert measured["batches"] == (1 if side == "dsmo" else 2)  # the reference: before and after DSMO's
        assert measured["runs_per_second"] > 0 and measured["latency_p95_s"] >= measured["latency_p50_s"] > 0
        rss = measured["worker_rss_mb"]
        assert rss["peak"] >= max(rss["before"], rss["after"]) - 1 and rss["before"] > 0
        assert {"worker", "python"} <= set(measured["cpu_ms_per_run"])
        history = measured["history"]
        assert history["moved_in_sample"] == history["sampled"] == RUNS
        assert history["old_generation_events_added"] > 0 and history["old_generation_bytes_added"] > 0
        assert history["new_generation_events"] >= 4 and history["new_generation_bytes"] > 0
    assert figures["ratio"] == figures["dsmo"]["runs_per_second"] / figures["bare"]["runs_per_second"]

    paths = save(figures, tmp_path, "2026-11-26T04:00:00+00:00")
    saved = json.loads(paths["json"].read_text())
    assert "batch_report" not in saved and saved["batch_report_file"] == paths["batch"].name
    assert json.loads(paths["batch"].read_text())["summary"]["done"] == RUNS
    results = {"migration": saved, "command": "test", "started_at": "now", "machine": "here"}
    page = with_section("# Benchmarks\n", results)
    assert page.startswith("# Benchmarks") and START in page and END in page
    assert "| Runs moved per second |" in page and "| ≥ 0.5 |" in page
    assert f"| {RUNS:,} of {RUNS:,} | {RUNS:,} of {RUNS:,} |" in page
    assert "| Refused / failed | 0 / 0 | 0 / 0 |" in page
    assert "load average" in page
    assert with_section(page, results) == page  # spliced in place, not appended twice
