"""Memory under hostile inputs, measured through the real entry points (`bench/studies/hostile/memory.py`):
each case is refused or bounded, and no process grows more than the stated bound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.studies.hostile import memory as hostile
from tests.conftest import Harness

pytestmark = pytest.mark.integration


async def test_hostile_inputs_stay_under_the_memory_bound(harness: Harness, tmp_path: Path) -> None:
    cases = {(case.entry, case.case): case for case in await hostile.measure(harness.settings, tmp_path)}
    over = [
        f"{entry}: {name}: {case.over_baseline_mb:.0f} MB"
        for (entry, name), case in cases.items()
        if not case.within_bound
    ]
    assert over == [], over
    validate = {name: case.answer for (entry, name), case in cases.items() if entry == "dsmo definitions validate"}
    assert "more than 100,000 values" in validate["nested YAML aliases (9^9 strings)"]
    assert "nests comprehensions 6 deep" in validate["six nested map comprehensions"]
    assert "unknown field 'lists'" in validate["lists.range(100000000)"]
    assert "nested more than 32 levels deep" in validate["definition nested 500 deep"]
    assert "larger than 1000000 bytes" in validate["/dev/zero"]
    # Publishable, and stopped by the cap on each replace when evaluated.
    assert validate["27 chained replace('a','aa')"].startswith("exit 0")
    assert "above 65536" in cases[("condition evaluation", "27 chained replace('a','aa')")].answer
    served = {name: case.answer for (entry, name), case in cases.items() if entry != "dsmo definitions validate"}
    assert served["1 GiB chunked body, no key"].startswith("401")
    assert served["1 GiB chunked body, valid key"].startswith("413")
    assert served["Content-Length: 1 GiB declared"] == "413"
    assert served["event data nested 900 deep"] == "400"  # invalid_json: nested past 64, refused before parsing
    assert served["200 MiB chunked body"].startswith("413")
    # Answered, and other requests with it (how fast is `make hostile`'s to say, not the suite's).
    page = served["console page of a 500-node definition"]
    assert page.startswith("200, ") and re.search(r"\b[1-9]\d* reads? answered meanwhile", page), page
    assert (tmp_path / "hostile.json").exists()
