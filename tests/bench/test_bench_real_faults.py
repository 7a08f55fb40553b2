"""Table 1's real faults, their pure parts: the crash point's decision, the supervisor's counting,
when a server restart strikes, a call riding out a restart, and the counts the table shows."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench import reconnecting as reconnecting_module
from bench.agents import DIE, LOSE_COMPLETION, REPORT, after_work
from bench.paired import FAULT_KINDS
from bench.reconnecting import reconnecting
from bench.restarts import POSTGRES, TEMPORAL, Restart, due, server_of
from bench.supervisor import Deaths, Supervised
from bench.table1 import MODES, table1
from bench.table1_faults import downtimes, fault_rows, real_faults, skipped, totals
from tests.bench.test_bench_table1 import results as hand_made
from tests.polling import until


@pytest.mark.parametrize(
    ("fault", "then"),
    [("crash", DIE), ("lost_ack", LOSE_COMPLETION), ("slow", REPORT), (None, REPORT), ("", REPORT)],
)
def test_only_a_crash_dies_after_the_work_and_only_a_lost_ack_loses_its_completion(
    fault: str | None, then: str
) -> None:
    assert after_work(fault) == then


def test_every_fault_kind_has_one_decision() -> None:
    decided = {kind: after_work(kind) for kind in FAULT_KINDS}
    assert [kind for kind, then in decided.items() if then == DIE] == ["crash"]
    assert [kind for kind, then in decided.items() if then == LOSE_COMPLETION] == ["lost_ack"]


def test_deaths_tell_a_sigkill_from_any_other_exit() -> None:
    deaths = Deaths()
    for returncode in (-signal.SIGKILL, 1, -signal.SIGKILL, -signal.SIGTERM, 0):
        deaths.count(returncode)
    assert (deaths.kills, deaths.exits, deaths.total) == (2, 3, 5)


# Kills itself the first time it runs (no marker yet), then stays up.
ONCE = (
    "import os, signal, sys, time, pathlib\n"
    "marker = pathlib.Path(sys.argv[1])\n"
    "if not marker.exists():\n"
    "    marker.touch()\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "time.sleep(60)\n"
)


async def test_the_supervisor_restarts_a_killed_process_and_counts_the_kill(tmp_path: Path) -> None:
    marker = tmp_path / "killed-once"
    process = Supervised([sys.executable, "-c", ONCE, str(marker)], {}, restart_after=0.05)
    await process.start()
    try:
        await until(lambda: process.restarts == 1 and process.pid is not None, "one restart", pause=0.05)
        assert (process.deaths.kills, process.deaths.exits) == (1, 0)
    finally:
        await process.stop()
    # Stopping it is not a death: the counts stay as they were.
    assert process.pid is None and process.deaths.total == 1 and process.restarts == 1


def test_a_server_restarts_once_half_of_w3_s_and_w4_s_inputs_have_started() -> None:
    assert [due("W3", started, 12) for started in (1, 5, 6, 7)] == [False, False, True, True]
    assert due("W4", 50, 100) and not due("W4", 49, 100)
    assert due("W3", 1, 1) and due("W3", 1, 2)  # the smallest sizes still meet one
    assert not any(due(workload, 12, 12) for workload in ("W1", "W2"))
    assert server_of("B3") == TEMPORAL
    assert {server_of(mode) for mode in ("B1", "B1p", "B2", "B2s05")} == {POSTGRES}
    assert Restart(TEMPORAL, None, "not ours").count == 0 and Restart(POSTGRES, 0.3).count == 1


class Flaky:
    """A connection holder whose call fails while the server is away, ``failures`` times."""

    def __init__(self, failures: int) -> None:
        self.failures, self.resets = failures, 0

    def reset(self) -> None:
        self.resets += 1

    @reconnecting
    def read(self, value: int) -> int:
        if self.failures:
            self.failures -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return value


def test_a_call_rides_out_a_restart_on_a_new_connection_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconnecting_module, "RECONNECT_S", 0.0)
    flaky = Flaky(failures=3)
    assert flaky.read(7) == 7 and flaky.resets == 3
    monkeypatch.setattr(reconnecting_module, "RIDE_OUT_S", 0.0)
    with pytest.raises(psycopg.OperationalError):
        Flaky(failures=2).read(1)


def measured(kills: int, deaths: int, restarts: int, restart: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"faults": {"kills": kills, "deaths": deaths, "server_restarts": restarts, "restart": restart}}


WORKLOADS: dict[str, Any] = {
    "W1": {"B3": measured(0, 0, 0), "B1": measured(0, 0, 0), "pairing": {}},
    "W3": {
        "B3": measured(2, 2, 0, {"server": TEMPORAL, "down_s": None, "reason": "not the bench's stack"}),
        "B1": measured(3, 4, 1, {"server": POSTGRES, "down_s": 0.3, "reason": ""}),
        "pairing": {},
    },
    "W4": {"B3": measured(1, 1, 1), "B1": measured(1, 1, 1), "pairing": {}},
}


def test_the_counts_are_summed_per_mode_and_a_skipped_restart_says_why() -> None:
    assert totals(WORKLOADS) == {
        "B3": {"kills": 3, "deaths": 3, "server_restarts": 1},
        "B1": {"kills": 4, "deaths": 5, "server_restarts": 2},
    }
    assert totals({"W1": {"B3": {"summary": {}}, "pairing": {}}}) == {}  # results from before the counts
    assert skipped(WORKLOADS) == ["not the bench's stack"]


def test_table_1_shows_each_mode_s_kills_and_restarts_over_its_repetitions() -> None:
    results = {"faults": [totals(WORKLOADS), totals(WORKLOADS)], "config": {"executors": 4}}
    rows = fault_rows(results, ("B3", "B1"))
    assert rows[0].startswith("| Executor processes SIGKILLed") and "| 6 (3 + 3) | 8 (4 + 4) |" in rows[0]
    assert "| 2 (1 + 1) | 4 (2 + 2) |" in rows[2]
    assert rows[3] == (
        "| Stage executors | 4 (one worker process, 4 activity slots) | 4 (consumer processes, one stage at a time) | |"
    )
    assert fault_rows({"config": {}}, ("B3",)) == []  # results from before the counts: no rows


def test_the_rows_come_after_table_1_s_metrics() -> None:
    faults = {mode: {"kills": 1, "deaths": 1, "server_restarts": 2} for mode in MODES}
    lines = table1({**hand_made(), "faults": [faults]}).splitlines()
    assert lines[-3].startswith("| Executor processes SIGKILLed") and "| 1 | 1 | 1 | 1 |" in lines[-3]
    assert lines[-1].startswith("| Server restarts") and "| 2 | 2 | 2 | 2 |" in lines[-1]


def test_the_notes_say_what_every_mode_met_and_why_temporal_was_not_restarted() -> None:
    results = {"faults": [totals(WORKLOADS)], "workloads": WORKLOADS}
    text = real_faults(results, {"B3": "DSMO (B3)"})
    assert text.startswith("- **Every mode met real faults**")
    assert "DSMO (B3): 3 processes killed, 1 server restarts; B1: 4 processes killed, 2 server restarts" in text
    assert "PostgreSQL away 0.3-0.3 s" in text and "Temporal was not restarted: not the bench's stack." in text
    assert downtimes(WORKLOADS, POSTGRES) == [0.3] and downtimes(WORKLOADS, TEMPORAL) == []
    assert "not counted" in real_faults({"workloads": {}}, {})


def test_the_table_shows_b3_replayed_from_its_record_pooled_over_workloads() -> None:
    from bench.table1 import from_record_row

    results = {
        "workloads": {
            "W1": {"B3": {"summary": {"sps_from_record": 1.0, "replays_from_record": 3}}, "B1": {"summary": {}}},
            "W2": {"B3": {"summary": {"sps_from_record": 0.5, "replays_from_record": 2}}, "B1": {"summary": {}}},
        }
    }
    row = from_record_row(results, ("B3", "B1"))
    assert row.split(" | ")[1:3] == ["0.800 (4/5)", "—"]
    assert "—" in from_record_row({"workloads": {"W1": {"B3": {"summary": {}}}}}, ("B3",))
