"""The scale section puts DSMO beside bare Temporal doing the same starts and replies."""

from __future__ import annotations

from bench.studies.scale.scale_report import scale_section


def test_the_scale_section_shows_rates_beside_bare_temporal_and_flat_histories() -> None:
    console = {
        **{key: {"p50_ms": 40.0, "p95_ms": 120.0, "n": 60} for key in ("tasks", "tasks_filtered", "run_page")},
        "tasks_fresh_total": {"p50_ms": 410.0, "p95_ms": 450.0, "n": 10},
        "visibility_list": {"p50_ms": 12.0, "p95_ms": 20.0, "n": 60},
        "visibility_count": {"p50_ms": 380.0, "p95_ms": 420.0, "n": 60},
    }
    scale = {
        "runs": 100_000,
        "first": 100,
        "start_seconds": 700.0,
        "start_per_s": 150.0,
        "floor_start_per_s": 300.0,
        "resume": {"offered_per_s": 200.0, "achieved_per_s": 80.0, "p50": 0.5, "p95": 0.9},
        "floor_resume": {"offered_per_s": 200.0, "achieved_per_s": 160.0, "p50": 0.2, "p95": 0.4},
        "resume_p50_at_10": 0.02,
        "resume_p95_at_first": 0.04,
        "resume_p50_at_scale": 0.05,
        "resume_p95_at_scale": 0.09,
        "history_bytes_first": 2203,
        "history_bytes_last": 2209,
        "worker_rss_mb": 900.0,
        "worker_rss_after_mb": 950.0,
        "server_rss_mb": 2500.0,
        "console": console,
    }
    results = {"command": "make bench SCALE=100000", "started_at": "2026-11-27T00:00:00+00:00", "machine": "m"}
    text = scale_section({**results, "scale": scale})
    assert text is not None and text.startswith("<!-- scale:start -->") and text.endswith("<!-- scale:end -->")
    assert "| Start rate (start calls/s; DSMO's all waiting after 700 s) | 150 | 300 | 0.50x |" in text
    assert "| Resume rate, 200/s offered (replies/s) | 80 | 160 | 0.50x |" in text
    assert "| History bytes of a waiting run, started first / last | 2,203 / 2,209 | | |" in text
    assert "| Task list, first page | 40 | 120 | 60 | p95 < 300 |" in text
    assert "| Visibility alone: the list's total (a fresh count) | 380 | 420 | 60 |  |" in text
    assert "| Task list, first page, its total counted afresh | 410 | 450 | 10 | p95 < 300 |" in text
    # Results from before the visibility calls were timed alone lack their rows.
    earlier = {**scale, "console": {key: console[key] for key in ("tasks", "tasks_filtered", "run_page")}}
    assert "Visibility alone" not in (scale_section({**results, "scale": earlier}) or "").split("| Console with")[1]
    # Results from before the reference was measured still render.
    old = {"runs": 10_000, "start_seconds": 90.0, "worker_rss_mb": 283.0, "server_rss_mb": 700.0}
    assert "| Time to start them all (s) | 90.0 | | |" in (scale_section({**results, "scale": old}) or "")
    assert scale_section(results) is None
