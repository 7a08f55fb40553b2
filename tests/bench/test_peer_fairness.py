"""W6 made fair: one in-flight cap, two reply shapes, repeats split, documented keys, DSMO's local
variant, and the scale test's sides alternated. Hand-made data, no servers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench.studies.peers.contenders import Contender
from bench.studies.peers.fault_plan import FaultPlan
from bench.studies.peers.peer_bench import DSMO_REGULAR, NAMES, PeerConfig, World, runner_env, runs_on_temporal
from bench.studies.peers.peer_ledger import (
    DONE,
    EFFECT,
    KILL,
    START,
    Received,
    Row,
    crash_counts,
    keyed_counts,
)
from bench.studies.peers.peer_rounds import TEMPORAL_LOCAL
from bench.studies.peers.peer_work import PeerWork
from bench.studies.peers.peers_report import repeats_table, section, waiting_table
from bench.studies.peers.runner_config import STAGE_SLOTS, RunnerConfig
from bench.studies.scale.scale import alternated, bounded_sides, paced_sides

pytestmark = pytest.mark.usefixtures("registry_restored")


def _row(run_id: str, stage: str, kind: str, detail: str = "") -> Row:
    return Row(run_id, stage, kind, detail, 0.0)


def test_repeats_after_a_planned_kill_after_the_work_are_planned_and_the_rest_collateral() -> None:
    rows = [
        # r1: killed after B's work (planned): B done twice, one planned repeat.
        _row("r1", "B", DONE),
        _row("r1", "B", KILL, "after"),
        _row("r1", "B", DONE),
        _row("r1", "send", EFFECT, "reply"),
        # r2: killed during A (no work done yet): A done once; C repeated by the kill while waiting.
        _row("r2", "A", KILL, "during"),
        _row("r2", "A", DONE),
        _row("r2", "C", DONE),
        _row("r2", "C", DONE),
        _row("r2", "send", EFFECT, "reply"),
        # r3: killed after the send (planned): its effect applied twice, planned.
        _row("r3", "send", EFFECT, "reply"),
        _row("r3", "send", DONE),
        _row("r3", "send", KILL, "after"),
        _row("r3", "send", EFFECT, "reply"),
        _row("r3", "send", DONE),
        # r4: an effect applied twice with no kill at its send: collateral; and B done three
        # times after one planned kill: one planned repeat, one collateral.
        _row("r4", "B", DONE),
        _row("r4", "B", KILL, "after"),
        _row("r4", "B", DONE),
        _row("r4", "B", DONE),
        _row("r4", "send", EFFECT, "reply"),
        _row("r4", "send", EFFECT, "reply"),
        # another contender's run is not counted
        _row("x9", "A", DONE),
        _row("x9", "A", KILL, "after"),
        _row("x9", "A", DONE),
    ]
    counts = crash_counts(rows, ["r1", "r2", "r3", "r4"], set())
    assert counts.stages_twice == 4  # r1.B, r2.C, r3.send, r4.B: as before the split
    assert (counts.stage_repeats_planned, counts.stage_repeats_collateral) == (3, 2)
    assert counts.effects_twice == 2
    assert (counts.effects_twice_planned, counts.effects_twice_collateral) == (1, 1)
    assert counts.kills == 5  # every kill row read (the rows are already the contender's own)


def test_with_stable_documented_keys_no_effect_is_applied_twice() -> None:
    receipts = [
        Received("dsmo/k-r1", "r1", 1),
        Received("dsmo/k-r2", "r2", 3),  # delivered three times under one key: applied once
        Received("dsmo/k-x9", "x9", 2),  # another contender's run
    ]
    counts = keyed_counts(receipts, ["r1", "r2", "r3"])
    assert (counts.runs, counts.applied, counts.effects_twice, counts.deduped) == (3, 2, 0, 2)
    # A key that changes between deliveries (not the engine's stable key) applies it twice.
    unstable = keyed_counts([Received("a/1", "r1", 1), Received("a/2", "r1", 1)], ["r1"])
    assert (unstable.applied, unstable.effects_twice, unstable.deduped) == (1, 1, 0)


class _Ledger:
    """The ledger's calls, recorded."""

    contender = "temporal"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def write(self, run_id: str, stage: str, kind: str, detail: str = "") -> None:
        self.calls.append(("write", run_id, stage, kind, detail))

    def receive(self, key: str, run_id: str, detail: str) -> None:
        self.calls.append(("receive", key, run_id, detail))

    def killed_before(self, run_id: str, stage: str) -> bool:
        return False


def test_the_send_applies_its_effect_to_the_ledger_and_to_the_receiver_under_the_engine_key() -> None:
    ledger = _Ledger()
    work = PeerWork(ledger, FaultPlan())  # type: ignore[arg-type]
    work.effect("r1", "reply", key="run-7/5")
    assert ledger.calls == [
        ("write", "r1", "send", START, ""),
        ("write", "r1", "send", EFFECT, "reply"),
        ("receive", "temporal/run-7/5", "r1", "reply"),
        ("write", "r1", "send", DONE, ""),
    ]


def test_the_crash_cap_is_one_constant_that_reaches_every_runner(tmp_path: Path) -> None:
    assert STAGE_SLOTS == 16
    config = RunnerConfig("dbos", "ledger", "state", tmp_path / "plan.json", "q", 60.0, 8000, capped=True)
    assert config.to_env()["PEERS_CAPPED"] == "1"
    uncapped = RunnerConfig("dbos", "ledger", "state", None, "q", 60.0, 8000)
    assert uncapped.to_env()["PEERS_CAPPED"] == ""


def test_dsmo_regular_runs_beside_dsmo_unless_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.studies.peers import dsmo_peer
    from dsmo.workflows.definition.local_stages import runs_locally

    monkeypatch.delenv("PEERS_DSMO_REGULAR", raising=False)
    monkeypatch.delenv("PEERS_TEMPORAL_LOCAL", raising=False)
    assert PeerConfig().names() == ("dsmo", DSMO_REGULAR, "temporal", TEMPORAL_LOCAL, "langgraph", "dbos")
    assert PeerConfig(dsmo_regular=False, temporal_local=False).names() == NAMES
    monkeypatch.setenv("PEERS_DSMO_REGULAR", "0")
    monkeypatch.setenv("PEERS_TEMPORAL_LOCAL", "0")
    assert PeerConfig.quick().names() == NAMES
    default, regular = dsmo_peer.definition(45), dsmo_peer.definition(45, regular=True)
    stages, sends = ("A", "B", "C"), ("send", "send_timeout")
    # The send acts too, keyed by its idempotency key: a short stage like the others, local by
    # default (docs: local stages), as DBOS's steps and LangGraph's nodes run in their process.
    assert all(runs_locally(default, default.nodes[name]) for name in stages + sends)
    assert not any(runs_locally(regular, regular.nodes[name]) for name in stages + sends)
    assert regular.nodes["reply"] == default.nodes["reply"]


def test_the_section_reports_both_reply_shapes_and_the_split_ledger() -> None:
    measured = {
        "p50": 0.3,
        "p95": 0.4,
        "throughput_per_min": 1500.0,
        "cpu_ms_per_run": {"runner": 20.0, "server": 30.0, "s3": 8.0},
        "resume_p50": 0.01,
        "resume_p95": 0.02,
        "engine_bytes_per_run": 4000,
        "store_bytes_per_run": 400,
        "user_code_lines": 30,
        "while_waiting": {"p50": 0.35, "p95": 0.5, "throughput_per_min": 1200.0},
    }
    faster = {**measured, "while_waiting": {"p50": 0.2, "p95": 0.3, "throughput_per_min": 2400.0}}
    contenders = {"temporal": measured, DSMO_REGULAR: faster}
    waiting = waiting_table(contenders)
    assert "| raw Temporal | 350 ms | 500 ms | 1200 |" in waiting
    assert "| DSMO, stages as regular activities | 200 ms | 300 ms | 2400 (2.00x) |" in waiting
    crash = {
        "stage_repeats_planned": 18,
        "stage_repeats_collateral": 7,
        "effects_twice_planned": 4,
        "effects_twice_collateral": 6,
        "keyed": {"runs": 200, "applied": 200, "effects_twice": 0, "deduped": 10},
    }
    assert "| raw Temporal | 18 | 7 | 4 | 6 | 200 | 0 | 10 |" in repeats_table({"temporal": crash})
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
    full = {
        **crash,
        **dict.fromkeys(("runs", "completed", "failed", "lost", "stages_twice", "effects_twice"), 0),
        **dict.fromkeys(("timeouts_never_fired", "replies_ignored", "kills"), 0),
    }
    results = {
        "command": "make bench PEERS=1",
        "started_at": "2026-11-26T16:00:00+00:00",
        "machine": "test",
        "peers": {"config": config, "contenders": contenders, "crash": {"temporal": full}, "stage_slots": 16},
    }
    text = section(results)
    assert text is not None
    assert "before the run waits" in text and "Reply sent while the run waits" in text
    assert "`worker_concurrency=16`" in text and "planned and collateral" in text


def test_the_scale_sides_take_turns_in_chunks_the_first_swapping_each_round() -> None:
    turns = alternated({"dsmo": list(range(5)), "floor": list(range(10, 14))}, 2)
    assert [(name, list(part)) for name, part in turns] == [
        ("dsmo", [0, 1]),
        ("floor", [10, 11]),
        ("floor", [12, 13]),
        ("dsmo", [2, 3]),
        ("dsmo", [4]),
    ]
    assert alternated({}, 3) == []


def test_paced_sides_alternates_the_calls_and_rates_each_side_on_its_own_time() -> None:
    order: list[str] = []

    def call(name: str) -> Any:
        async def made() -> None:
            order.append(name)

        return made

    sides = {"dsmo": [call("d")] * 4, "floor": [call("f")] * 4}
    rates = asyncio.run(paced_sides(10_000.0, sides, chunk=2))
    assert order == ["d", "d", "f", "f", "f", "f", "d", "d"]
    assert set(rates) == {"dsmo", "floor"} and all(r["achieved_per_s"] > 0 for r in rates.values())


def test_bounded_sides_starts_the_sides_in_turns_and_times_each_on_its_own() -> None:
    order: list[str] = []

    def call(name: str, pause: float) -> Any:
        async def made() -> None:
            order.append(name)
            await asyncio.sleep(pause)

        return made

    sides = {"dsmo": [call("d", 0.0)] * 3, "floor": [call("f", 0.02)] * 3}
    seconds = asyncio.run(bounded_sides(sides, limit=1, chunk=2))
    assert order == ["d", "d", "f", "f", "f", "d"]
    assert set(seconds) == {"dsmo", "floor"} and seconds["floor"] >= 0.06  # its own pauses, on its side


def test_every_runner_module_imports_and_reads_the_one_cap() -> None:
    from bench.studies.peers import dbos_peer, langgraph_peer, temporal_peer

    caps = {vars(module)["STAGE_SLOTS"] for module in (dbos_peer, langgraph_peer, temporal_peer)}
    assert caps == {STAGE_SLOTS}
    assert dbos_peer.STAGES == "peer-stages" and dbos_peer._stages == []  # registered at launch, when capped


def test_every_runner_logs_warnings_only_and_the_temporal_runners_are_known(tmp_path: Path) -> None:
    from dsmo.devstack.stack import private_settings

    world = World(private_settings(tmp_path), None, None, None, tmp_path)  # type: ignore[arg-type]
    config = RunnerConfig("dsmo", "ledger", "", None, "q", 60.0, 0)
    env = runner_env(Contender("dsmo", config, None), world)  # type: ignore[arg-type]
    # The LangGraph and DBOS runners log at WARNING; DSMO's worker would write a line per step.
    assert env["DSMO_LOG_LEVEL"] == "warning"
    assert env["DSMO_TASK_QUEUE"] == "q"
    config_all = PeerConfig(rounds=1, dsmo_regular=True, temporal_local=True)
    assert [name for name in config_all.names() if runs_on_temporal(name)] == [
        "dsmo",
        DSMO_REGULAR,
        "temporal",
        TEMPORAL_LOCAL,
    ]
