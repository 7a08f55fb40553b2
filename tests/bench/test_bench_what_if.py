"""The what-if section of `make bench` runs end to end at a tiny size and its report is computed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.studies.what_if.what_if_bench import what_if_bench
from bench.studies.what_if.what_if_cli import with_section
from bench.studies.what_if.what_if_report import END, START, save
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings

pytestmark = pytest.mark.integration

RUNS = 6


async def test_the_corpus_is_replayed_against_the_candidate_beside_its_own_first_run(
    stack_settings: Settings, dsmo: DsmoClient, tmp_path: Path
) -> None:
    figures = await what_if_bench(stack_settings.with_changes(worker={"metrics_bind": ""}), dsmo, RUNS)

    # Every run replayed; exactly the "no" runs took the candidate's new transition; no error.
    assert figures["runs"] == RUNS and figures["answers"] == {"yes": RUNS // 2, "no": RUNS // 2}
    summary = figures["report_summary"]
    assert summary["runs"] == RUNS and summary["errors"] == 0
    assert summary["diverged"] == figures["diverged_expected"] == RUNS // 2
    assert summary["samePath"] == RUNS - RUNS // 2
    assert summary["byDivergence"] == {"after reply: reject -> follow_up": RUNS // 2}
    # The record answered everything: the corpus called its agent and sent its messages once
    # each; the replay called no agent and sent nothing.
    assert figures["agent_calls"] == {"corpus": RUNS, "during_replay": 0, "by_replays": 0}
    assert figures["messages"] == {"corpus": 2 * RUNS, "during_replay": 0, "to_replays": 0}
    for side in ("original", "replay"):
        measured = figures[side]
        assert measured["seconds"] > 0 and measured["runs_per_second"] > 0
        assert {"worker", "python"} <= set(measured["cpu_ms_per_run"])
    assert figures["ratio"] == figures["replay"]["runs_per_second"] / figures["original"]["runs_per_second"]
    assert figures["planning"]["runs"] == RUNS and figures["planning"]["runs_per_second"] > 0
    history = figures["history"]
    assert history["sampled"] == RUNS
    assert history["original"]["events"] > 0 and history["replay"]["events"] > 0
    assert figures["replay_concurrency"] >= 1 and figures["starts_and_replies_at_once"] >= 1

    saved = json.loads(save(figures, tmp_path, "2026-11-26T04:00:00+00:00").read_text())
    assert saved["report_summary"] == summary
    results = {"what_if": saved, "command": "test", "started_at": "now", "machine": "here"}
    page = with_section("# Benchmarks\n", results)
    assert page.startswith("# Benchmarks") and START in page and END in page
    assert "| Runs per second |" in page and "| CPU ms per run, worker |" in page
    assert "| History events per run |" in page and "| Planning |" in page
    assert f"| Same path / diverged | {RUNS - RUNS // 2:,} / {RUNS // 2:,} |" in page
    assert "| Errors | 0 | 0 |" in page
    assert with_section(page, results) == page  # spliced in place, not appended twice
