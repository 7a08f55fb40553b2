"""W6 in rounds: the order rotates, the tables give medians, the verdict pairs each round's figures."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from bench.studies.peers.peer_bench import PeerConfig, rounds_from_env
from bench.studies.peers.peer_rounds import TEMPORAL_LOCAL, Ratio, combined, meets, turn_order, verdicts
from bench.studies.peers.peers_report import section, verdict_table


def figures(throughput: float, p50: float, cpu: tuple[float, float, float], round_number: int) -> dict[str, Any]:
    runner, server, s3 = cpu
    return {
        "p50": p50,
        "p95": p50 * 2,
        "throughput_per_min": throughput,
        "cpu_ms_per_run": {"runner": runner, "server": server, "s3": s3, "driver": 3.0},
        "resume_p50": 0.01,
        "resume_p95": 0.02,
        "engine_bytes_per_run": 4000,
        "store_bytes_per_run": 400,
        "user_code_lines": 22,
        "runner_restarts": 1,
        "while_waiting": {"p50": p50 * 1.5, "p95": p50 * 3, "throughput_per_min": throughput / 2},
        "round": round_number,
    }


def test_every_contender_takes_every_place_in_as_many_rounds_as_there_are_contenders() -> None:
    names = ("dsmo", "dsmo-regular", "temporal", "langgraph", "dbos")
    orders = [turn_order(names, number) for number in range(len(names))]
    assert orders[0] == names
    assert orders[1] == ("dsmo-regular", "temporal", "langgraph", "dbos", "dsmo")
    for place in range(len(names)):
        assert sorted(order[place] for order in orders) == sorted(names)
    assert turn_order(names, len(names)) == names
    assert turn_order((), 3) == ()


def test_the_combined_figures_are_the_medians_of_the_rounds_nested_ones_too() -> None:
    rounds = [
        figures(3000.0, 0.20, (17.0, 11.0, 7.0), 1),
        figures(1000.0, 0.50, (20.0, 13.0, 8.0), 2),
        figures(2000.0, 0.25, (18.0, 12.0, 9.0), 3),
    ]
    out = combined(rounds)
    assert out["throughput_per_min"] == 2000.0
    assert out["p50"] == 0.25
    assert out["cpu_ms_per_run"] == {"runner": 18.0, "server": 12.0, "s3": 8.0, "driver": 3.0}
    assert out["while_waiting"]["throughput_per_min"] == 1000.0
    assert out["runner_restarts"] == 3  # counted over the rounds, not a typical round
    assert out["user_code_lines"] == 22
    assert out["rounds"] == 3
    assert "round" not in out  # names one round: not a figure of all of them
    with pytest.raises(ValueError, match="rounds"):
        combined([])


def test_each_round_is_judged_against_the_best_peer_of_that_same_round() -> None:
    rounds = {
        "dsmo": [figures(2600.0, 0.20, (17.0, 11.0, 7.0), 1), figures(2000.0, 0.30, (20.0, 12.0, 8.0), 3)],
        "temporal": [figures(9000.0, 0.01, (1.0, 1.0, 1.0), 1)],  # the floor, not a peer
        "langgraph": [figures(2500.0, 0.25, (16.0, 5.0, 5.0), 1), figures(2500.0, 0.20, (16.0, 5.0, 4.0), 3)],
        "dbos": [figures(2000.0, 0.18, (17.0, 5.0, 5.0), 1), figures(3000.0, 0.25, (17.0, 6.0, 5.0), 2)],
    }
    first, third = verdicts(rounds)
    assert first.number == 1
    assert first.throughput == Ratio(2600.0 / 2500.0, "langgraph")
    assert first.latency == Ratio(0.20 / 0.18, "dbos")
    assert first.cpu == Ratio(35.0 / 26.0, "langgraph")
    # Round 2's DBOS figures have no DSMO round to pair with; in round 3 only LangGraph is there.
    assert third.number == 3
    assert third.throughput == Ratio(2000.0 / 2500.0, "langgraph")
    assert meets("throughput", first.throughput) and not meets("throughput", third.throughput)
    assert not meets("latency", first.latency)
    assert not meets("cpu", first.cpu)  # 1.35x against a 1.3x bound
    assert meets("cpu", Ratio(1.3, "dbos")) and not meets("cpu", None)
    alone = verdicts({"dsmo": [figures(2600.0, 0.2, (1.0, 1.0, 1.0), 1)]})
    assert alone[0].throughput is None and not meets("throughput", alone[0].throughput)


def test_the_section_says_how_many_rounds_and_how_often_each_target_was_met() -> None:
    rounds = {
        "dsmo": [figures(2600.0, 0.20, (17.0, 11.0, 7.0), 1), figures(2000.0, 0.30, (20.0, 12.0, 8.0), 2)],
        "dbos": [figures(2500.0, 0.25, (17.0, 5.0, 5.0), 1), figures(2500.0, 0.25, (17.0, 5.0, 5.0), 2)],
    }
    table = verdict_table(rounds)
    assert "| target | ≥ 1.00x | ≤ 1.00x | ≤ 1.30x |" in table
    assert "| 1 | 1.04x (DBOS Transact) | 0.80x (DBOS Transact) | 1.30x (DBOS Transact) |" in table
    assert "| rounds meeting the target | 1 of 2 | 1 of 2 | 1 of 2 |" in table
    assert verdict_table({}) == ""
    config = asdict(PeerConfig(rounds=2))
    peers = {
        "config": config,
        "contenders": {name: combined(entries) for name, entries in rounds.items()},
        "rounds": rounds,
        "crash": {},
    }
    text = section({"command": "make bench PEERS=1", "started_at": "2026-11-30", "machine": "test", "peers": peers})
    assert text is not None
    assert "in\n2 rounds" in text and "median of the rounds" in text
    assert "round by round" in text and table in text
    assert "Raw Temporal in DSMO's shape" not in text  # no such contender measured


def test_raw_temporal_with_local_activities_is_judged_against_the_peers_as_dsmo_is() -> None:
    rounds = {
        "dsmo": [figures(2600.0, 0.20, (17.0, 11.0, 7.0), 1)],
        TEMPORAL_LOCAL: [figures(2800.0, 0.19, (14.0, 10.0, 6.0), 1)],
        "dbos": [figures(3000.0, 0.18, (17.0, 5.0, 5.0), 1)],
    }
    (floor,) = verdicts(rounds, TEMPORAL_LOCAL)
    assert floor.throughput == Ratio(2800.0 / 3000.0, "dbos")
    assert floor.cpu == Ratio(30.0 / 27.0, "dbos")
    peers = {
        "config": asdict(PeerConfig(rounds=1)),
        "contenders": {name: combined(entries) for name, entries in rounds.items()},
        "rounds": rounds,
        "crash": {},
    }
    text = section({"command": "make bench PEERS=1", "started_at": "2026-11-30", "machine": "test", "peers": peers})
    assert text is not None
    assert "| raw Temporal, stages as local activities |" in text
    floor_table = text.split("Raw Temporal in DSMO's shape")[1]
    assert "| 1 | 0.93x (DBOS Transact) | 1.06x (DBOS Transact) | 1.11x (DBOS Transact) |" in floor_table


def test_the_rounds_setting_is_a_whole_number_of_at_least_one() -> None:
    assert rounds_from_env({}) == 3
    assert rounds_from_env({"PEERS_ROUNDS": "5"}) == 5
    for bad in ("0", "two", "-1", ""):
        with pytest.raises(ValueError, match="PEERS_ROUNDS: expected a whole number"):
            rounds_from_env({"PEERS_ROUNDS": bad})
