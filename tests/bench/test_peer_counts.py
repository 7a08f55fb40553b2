"""W6's crash counts and fault plan: what the ledger's rows are read as, and one plan for all."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.studies.peers.fault_plan import FaultPlan, Kill
from bench.studies.peers.peer_ledger import DONE, EFFECT, KILL, START, Row, crash_counts
from bench.studies.peers.peers_report import section

pytestmark = pytest.mark.usefixtures("registry_restored")


def _row(run_id: str, stage: str, kind: str, detail: str = "") -> Row:
    return Row(run_id, stage, kind, detail, 0.0)


def test_the_ledger_counts_losses_duplicates_and_timeouts_that_never_fired() -> None:
    rows = [
        # r1: clean, replied.
        *(_row("r1", stage, kind) for stage in ("A", "B", "C", "send") for kind in (START, DONE)),
        _row("r1", "send", EFFECT, "reply"),
        # r2: stage B's work done twice (killed after it), its effect applied twice.
        _row("r2", "B", DONE),
        _row("r2", "B", KILL, "after"),
        _row("r2", "B", DONE),
        _row("r2", "send", EFFECT, "reply"),
        _row("r2", "send", EFFECT, "reply"),
        # r3: never replied to, timed out as it should.
        _row("r3", "send", EFFECT, "timeout"),
        # r4: never replied to, and never ended: lost, and its timeout never fired.
        _row("r4", "A", START),
        # r5: replied to in time, but ended by its timeout (the reply was dropped).
        Row("r5", "C", DONE, "", 100.0),
        _row("r5", "send", EFFECT, "timeout"),
        # r6: never replied to, reached its wait, never ended: its timeout never fired.
        Row("r6", "C", DONE, "", 100.0),
        # r7: replied to after its timeout was due (the driver was late): not the contender's.
        Row("r7", "C", DONE, "", 100.0),
        _row("r7", "send", EFFECT, "timeout"),
        # another contender's run is not counted
        _row("x9", "A", DONE),
        _row("x9", "A", DONE),
    ]
    rows += [Row("r8", "C", DONE, "", 100.0)]  # r8: never replied to, failed after C (the engine says so)
    # r9: to be replied to, but the driver never handed its reply over: not an ignored reply.
    rows += [Row("r9", "C", DONE, "", 100.0), _row("r9", "send", EFFECT, "timeout")]
    runs = ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]
    sent = {"r1": 0.0, "r2": 0.0, "r5": 130.0, "r7": 170.0}
    no_reply = {"r3", "r4", "r6", "r8"}
    counts = crash_counts(rows, runs, no_reply, replies_sent=sent, wait_seconds=60, failed={"r8", "r1", "x9"})
    assert (counts.runs, counts.completed, counts.failed, counts.lost) == (9, 6, 1, 2)
    assert (counts.stages_twice, counts.effects_twice) == (1, 1)
    assert counts.timeouts_never_fired == 1  # r6; r4 never reached its wait (it is lost)
    assert (counts.replies_ignored, counts.late_replies) == (1, 1)
    assert counts.kills == 1


def test_one_seed_draws_one_plan_and_every_contender_gets_it_renamed(tmp_path: Path) -> None:
    runs = [f"r{i:04d}" for i in range(200)]
    plan = FaultPlan.draw(runs, seed=41, kill_share=0.15, no_reply_share=0.2)
    assert plan == FaultPlan.draw(runs, seed=41, kill_share=0.15, no_reply_share=0.2)
    assert plan != FaultPlan.draw(runs, seed=42, kill_share=0.15, no_reply_share=0.2)
    assert 15 <= len(plan.kills) <= 50 and 20 <= len(plan.no_reply) <= 65
    assert {kill.point for kill in plan.kills.values()} == {"during", "after"}
    renamed = plan.renamed("dbos-crash-1-")
    path = tmp_path / "plan.json"
    renamed.save(path)
    loaded = FaultPlan.load(path)
    assert loaded == renamed
    run_id, kill = next(iter(plan.kills.items()))
    assert loaded.kill_at("dbos-crash-1-" + run_id, kill.stage, kill.point)
    assert not loaded.kill_at(run_id, kill.stage, kill.point)
    assert FaultPlan.load(None) == FaultPlan() and not FaultPlan().kill_at("r", "A", "during")
    assert Kill("A", "during") in FaultPlan.draw(runs, seed=1, kill_share=1.0, no_reply_share=0).kills.values()


def test_the_section_shows_every_contender_and_the_ratio_to_raw_temporal() -> None:
    measured = {
        "p50": 0.3,
        "p95": 0.4,
        "throughput_per_min": 1500.0,
        "cpu_ms_per_run": {"runner": 20.0, "server": 30.0, "s3": 8.0, "driver": 2.0},
        "resume_p50": 0.01,
        "resume_p95": 0.02,
        "engine_bytes_per_run": 4000,
        "store_bytes_per_run": 400,
        "user_code_lines": 30,
    }
    crash = {
        "runs": 200,
        "completed": 200,
        "failed": 0,
        "lost": 0,
        "stages_twice": 3,
        "effects_twice": 1,
        "timeouts_never_fired": 0,
        "replies_ignored": 0,
        "late_replies": 0,
        "kills": 30,
        "hand_overs_failed": 0,
    }
    config = {
        "wait_seconds": 45,
        "latency_concurrency": 10,
        "throughput_runs": 300,
        "throughput_concurrency": 50,
        "crash_runs": 200,
        "crash_wait_seconds": 120,
        "seed": 41,
        "kill_share": 0.15,
        "no_reply_share": 0.2,
    }
    fast = {**measured, "throughput_per_min": 3000.0}
    results = {
        "command": "make bench PEERS=1",
        "started_at": "2026-11-26T16:00:00+00:00",
        "machine": "test",
        "peers": {"config": config, "contenders": {"temporal": measured, "dbos": fast}, "crash": {"dbos": crash}},
    }
    text = section(results)
    assert text is not None
    assert "| raw Temporal | 300 ms | 400 ms | 1500 |" in text
    assert "| DBOS Transact | 300 ms | 400 ms | 3000 (2.00x) |" in text
    assert "| DBOS Transact | 200 | 200 | 0 | 0 | 3 | 1 | 0 | 0 | 30 + 1 | 0, 0 |" in text
    assert section({"command": "x"}) is None


def test_dsmo_graph_goes_to_the_timeout_send_when_no_reply_came() -> None:
    from bench.studies.peers import dsmo_peer
    from bench.studies.peers.contenders import input_document
    from dsmo.workflows.definition.conditions import evaluate_condition

    wait = dsmo_peer.definition(45).nodes["reply"]
    when = wait.transitions[0].when
    assert when is not None
    assert wait.transitions[0].to == "send" and wait.transitions[1].to == "send_timeout"
    # The input seeds lastResponse (null), so the condition reads it whether or not a reply came.
    assert evaluate_condition(when, {"lastResponse": input_document("r")["lastResponse"]}) is False
    assert evaluate_condition(when, {"lastResponse": "ok"}) is True
