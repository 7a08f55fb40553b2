"""What flow control's helper workflows and a move carry, measured as `make hostile` does
(`bench/studies/hostile/sizes.py`): each case refused or bounded where it says, and no workflow task failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.studies.hostile import sizes as hostile_sizes
from tests.conftest import Harness

pytestmark = pytest.mark.integration


async def test_lock_line_shard_debounce_and_move_sizes_stay_within_their_bounds(
    harness: Harness, tmp_path: Path
) -> None:
    cases = {case.case: case for case in await hostile_sizes.measure(harness.settings, tmp_path)}
    assert [case for case in cases.values() if not case.within_bound or case.failed_tasks] == []
    assert cases["lock line, 200-char run ids"].measured.startswith("1,000 in line, then refused")
    assert "FAILED, told in" in cases["lock shard, 1,000-char run ids"].measured
    assert "runs exist" in cases["debounce batch, 100 starts of 25 KB"].measured
    assert "a move hands over at most" in cases["migration target of 1 MB, input 600 KB"].measured
    written = json.loads((tmp_path / "hostile-sizes.json").read_text())
    assert [case["case"] for case in written] == list(cases)
