"""Sensitive variables: a definition's `sensitive:` list names values the audit trail keeps as a
fingerprint (`sha256:<hex>` of their canonical JSON) instead of in the clear.

A run with a data subject keys its fingerprints (`hmac-sha256:<hex>`, with a key derived from the
subject's data key): a short value (a birth date, a postcode) cannot be found by hashing every
candidate, and once the subject is erased nobody can check a guess against them at all.

The run itself still holds the values (its variables, its history: encrypt those with the
payload codec); the audit file in the object store, `dsmo audit`, the `events` query and
exports carry only the fingerprint, which proves what the value was to someone who has it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Collection, Mapping
from typing import Any

from dsmo.workflows.events.resume_events import EVENT_VARIABLES

STAGE_FIELD_PREFIX = "stages."


def fingerprint(value: Any, key: bytes | None = None) -> str:
    """``sha256:<hex>`` of ``value``'s canonical JSON; ``hmac-sha256:<hex>`` with a ``key``."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()
    if key is not None:
        return "hmac-sha256:" + hmac.new(key, canonical, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


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


def masked_variables(
    updates: Mapping[str, Any], sensitive: Collection[str], key: bytes | None = None
) -> dict[str, Any]:
    """``updates`` with each sensitive variable replaced by its fingerprint (keyed, given a ``key``)."""
    return {name: fingerprint(value, key) if name in sensitive else value for name, value in updates.items()}


def masked_summary(
    node_id: str, summary: Mapping[str, Any], sensitive: Collection[str], key: bytes | None = None
) -> dict[str, Any]:
    """A stage's summary with each field listed as ``stages.<node>.summary.<field>`` fingerprinted."""
    prefix = f"{STAGE_FIELD_PREFIX}{node_id}.summary."
    return {name: fingerprint(value, key) if prefix + name in sensitive else value for name, value in summary.items()}
