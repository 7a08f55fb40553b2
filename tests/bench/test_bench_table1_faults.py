"""Table 1 at its smallest, on a stack of its own: every mode meets real crashes and a restart of its
server in W3 and W4, its runs ride them out, and the table counts what each mode went through."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.paired import RATES, draw, inputs_for, trajectory
from bench.runner import Bench, BenchConfig
from bench.table1 import table1
from dsmo.devstack.stack import DevStack, private_settings

pytestmark = pytest.mark.integration

INPUTS = 2


def crashes_first(workload: str, seed: int) -> bool:
    """Whether one of the workload's inputs meets a crash on the first attempt of a stage it reaches."""
    for item in inputs_for(workload, INPUTS, seed):
        for stage in trajectory(workload, item.route):
            fault = draw(RATES[workload], seed, item.input_id, stage, 1)
            if fault == "crash":
                return True
            if fault is not None:  # a permanent failure ends the run; other faults change later attempts
                break
    return False


def seed_with_crashes() -> int:
    return next(seed for seed in range(5000) if crashes_first("W3", seed) and crashes_first("W4", seed))


# A private stack (its Temporal is killed), four workloads in four modes, each queue mode draining.
@pytest.mark.timeout(900)
async def test_every_mode_meets_real_crashes_and_a_server_restart(tmp_path: Path) -> None:
    settings = private_settings(tmp_path / "stack").with_changes(worker={"metrics_bind": "", "sandbox": False})
    stack = DevStack(settings)
    await stack.up(timeout=120)
    config = BenchConfig(
        seed=seed_with_crashes(), inputs=INPUTS, replays=1, concurrency=2, w4_inputs=INPUTS, w4_concurrency=2
    )
    config.ambiguity = 0.0  # B2 follows the graph: it reaches the crash its inputs draw, as the others do
    try:
        bench = Bench(settings, config, progress=lambda _: None, devstack=stack)
        async with bench.workers():
            results = await bench.table1_repeated()
    finally:
        stack.down()
    modes = ("B3", "B1", "B1p", "B2")
    for workload in ("W1", "W2", "W3", "W4"):
        for mode in modes:
            measured = results["workloads"][workload][mode]
            faults = measured["faults"]
            # Every run ended (its trail or its queue said so) despite the kills and the restart.
            assert measured["summary"]["runs"] == 2 * INPUTS and len(measured["records"]) == 2 * INPUTS
            if workload in ("W3", "W4"):
                server = "temporal" if mode == "B3" else "postgres"
                assert faults["server_restarts"] == 1 and faults["restart"]["server"] == server, (workload, mode)
                assert faults["restart"]["down_s"] > 0
                # The crash each input drew killed a real process: B3's worker, or a consumer.
                assert faults["kills"] >= 1 and faults["deaths"] >= faults["kills"], (workload, mode, faults)
            else:
                assert faults == {"kills": 0, "deaths": 0, "server_restarts": 0, "restart": None}
    assert all(results["faults"][0][mode]["server_restarts"] == 2 for mode in modes)
    text = table1({**results, "config": vars(config)})
    assert "| Executor processes SIGKILLed at crash points" in text and "| Stage executors | 4 (one worker" in text
