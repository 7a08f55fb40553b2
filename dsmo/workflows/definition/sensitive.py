"""Sensitive variables: a definition's `sensitive:` list names values the audit trail keeps as a
fingerprint (`sha256:<hex>` of their canonical JSON) instead of in the clear.

A run with a data subject keys its fingerprints (`hmac-sha256:<hex>`, with a key derived from the
subject's data key): a short value (a birth date, a postcode) cannot be found by hashing every
candidate, and once the subject is erased nobody can check a guess against them at all.

Beside the definition's list, a run with a subject fingerprints what DSMO itself writes about the
person (a concurrency key's value, whom a wait is on: `masked_key_label`, `masked_wait_data`), and the
flow-control workflows hold a key's value only as its digest (`key_digest`).

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


# What a wait shows that names or describes a person: the expected sender of a reply, whom a
# request went to, the reply's thread, an event's title. What is asked for (an event's name, the
# documents, the test) names things, and stays readable.
PERSONAL_WAIT_FIELDS = ("expectedFrom", "to", "threadId", "title")
CALL_WAIT_FIELDS = ("arguments", "reason", "conditionError")  # a tool call waiting for approval
# How a flow-control key value is named outside the run: the digest its lock's id already carries.
KEY_DIGEST_PREFIX = "sha256:"


def key_digest(value: str) -> str:
    """``sha256:<24 hex>`` of a concurrency or throttle key's value: the digest its lock's or bucket's
    workflow id already carries, so a flow-control workflow that keeps it learns nothing new.

    A value that is a digest already is kept as it is (state carried over from before is digested once).
    """
    if value.startswith(KEY_DIGEST_PREFIX) or not value:
        return value
    return KEY_DIGEST_PREFIX + hashlib.sha256(value.encode()).hexdigest()[:24]


def masked_key_label(label: str, value: str, key: bytes | None) -> str:
    """A concurrency key as the trail shows it (``applicant.id=K-17``): with a subject's ``key``, the
    value is its keyed fingerprint (``applicant.id=hmac-sha256:...``); without one, as it is."""
    if key is None or not value:
        return label
    name = label.removesuffix(f"={value}")
    return f"{name}={fingerprint(value, key)}"


def masked_wait_data(data: Mapping[str, Any], key: bytes | None) -> dict[str, Any]:
    """What RUN_WAITING records of a wait: with a subject's ``key``, the fields that name a person
    (`PERSONAL_WAIT_FIELDS`) and what a tool call waiting for approval carries (`CALL_WAIT_FIELDS`:
    the model's arguments and words) as keyed fingerprints; the run matches events against the
    values themselves."""
    if key is None:
        return dict(data)
    masked = PERSONAL_WAIT_FIELDS + CALL_WAIT_FIELDS
    return {name: fingerprint(value, key) if name in masked else value for name, value in data.items()}
