"""Sensitive variables: a definition's `sensitive:` list names values the audit trail keeps as a
fingerprint (`sha256:<hex>` of their canonical JSON) instead of in the clear.

The run itself still holds the values (its variables, its history: encrypt those with the
payload codec); the audit file in the object store, `dsmo audit`, the `events` query and
exports carry only the fingerprint, which proves what the value was to someone who has it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from dsmo.workflows.events.resume_events import EVENT_VARIABLES

STAGE_FIELD_PREFIX = "stages."


def fingerprint(value: Any) -> str:
    """``sha256:<hex>`` of ``value``'s canonical JSON."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def sensitive_problem(entry: str, stage_nodes: Collection[str]) -> str | None:
    """Why ``entry`` cannot be a sensitive variable, or None.

    An entry is an event variable (``lastResponse``; they are recorded in RUN_RESUMED) or a stage summary field
    (``stages.<node>.summary.<field>`` of a run_agent node).
    """
    if entry in EVENT_VARIABLES:
        return None
    parts = entry.split(".")
    if len(parts) == 4 and parts[0] == "stages" and parts[2] == "summary" and parts[3]:
        return None if parts[1] in stage_nodes else f"{entry!r}: {parts[1]!r} is not a run_agent node"
    return (
        f"{entry!r}: not a value the audit trail records (event variables: {', '.join(sorted(EVENT_VARIABLES))}; "
        "or stages.<node>.summary.<field>)"
    )


def masked_variables(updates: Mapping[str, Any], sensitive: Collection[str]) -> dict[str, Any]:
    """``updates`` with each sensitive variable replaced by its fingerprint."""
    return {name: fingerprint(value) if name in sensitive else value for name, value in updates.items()}


def masked_summary(node_id: str, summary: Mapping[str, Any], sensitive: Collection[str]) -> dict[str, Any]:
    """A stage's summary with each field listed as ``stages.<node>.summary.<field>`` fingerprinted."""
    prefix = f"{STAGE_FIELD_PREFIX}{node_id}.summary."
    return {key: fingerprint(value) if prefix + key in sensitive else value for key, value in summary.items()}
