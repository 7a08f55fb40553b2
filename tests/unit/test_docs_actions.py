"""The definitions reference names every action a definition may use, and says what a stage commits.

Readers learn the node kinds from docs/definitions.md's action table; a kind missing there (as
`invoke` once was) is one they cannot find. The orchestration page once said a stage "commits at
most once per key", which output keys (one per attempt) do not do: a visit commits once.
"""

from __future__ import annotations

import re
from pathlib import Path

from dsmo.workflows.definition.node_types import ACTION_TYPES

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROW = re.compile(r"^\| `([a-z_]+)` \|", re.MULTILINE)


def test_the_action_table_has_a_row_for_every_action_type() -> None:
    rows = ROW.findall((DOCS / "definitions.md").read_text(encoding="utf-8"))
    assert set(ACTION_TYPES) <= set(rows), f"no row in docs/definitions.md for {set(ACTION_TYPES) - set(rows)}"


def test_the_orchestration_page_says_a_visit_commits_once() -> None:
    page = (DOCS / "orchestration.md").read_text(encoding="utf-8")
    assert "commits at most once per key" not in page
    assert "each visit of a stage commits once" in page
