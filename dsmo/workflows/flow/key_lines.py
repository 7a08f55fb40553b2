"""A key value's line in a key lock, and telling its holders that a run waits for their slot.

A run of a key with at most `QUIET_LIMIT` slots that nobody waits for ends without giving its
slot back. So a key lock (`engine/key_locks.py`) that needs a slot tells the holders a run waits
(``SLOT_WANTED``): a holder still running gives its slot back as it ends; one that has ended
cannot take the signal (Temporal refuses it only once that end is committed), and its slot is free.
"""

from __future__ import annotations

from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import Field, field_validator

    from dsmo.workflows.definition.flow_control import QUIET_LIMIT
    from dsmo.workflows.definition.sensitive import key_digest
    from dsmo.workflows.flow.slot_grants import CLAIM_GRACE, holder_states
    from dsmo.workflows.flow.slot_line import ClaimAnswer, SlotLine

# How many runs may wait in one key value's line, and the most a shard's lines may carry (in
# bytes, estimated by `carried_bytes`): a shard carries its lines across continue-as-new, in one
# payload Temporal caps at 2 MB. A starter's claim beyond either is refused with the reason; a
# run already started that asks for a later key is lined up up to `SHARD_CEILING`, and beyond it
# told (`SLOT_REFUSED`): it ends FAILED with the reason (`run/flow_slots.py`).
LINE_LIMIT = 1_000
SHARD_BUDGET = 1_000_000
SHARD_CEILING = 1_500_000
# workflow.patched id: a key lock tells a run its shard has no room for (it only logged it before).
REFUSAL_PATCH = "key-lock-refusals"
# workflow.patched id: a claim that replaces the runs in line (cancel-previous) goes first in line;
# a lock from before put it in line by priority, and replays of its history must do the same.
REPLACES_PATCH = "key-lock-replaces"
ENTRY_OVERHEAD = 64  # a run's timestamp, priority and JSON punctuation beside its id's three copies

# What telling a holder found: it holds the slot still, it has ended (its slot is free now), or
# it may be a run a starter claimed for that has not started yet (only Temporal can tell).
Told = Literal["held", "gone", "unsure"]


class KeyClaimAnswer(ClaimAnswer):
    """A key lock's answer to a claim.

    Attributes:
        verify: The key is full of holders not yet told that a run waits: some may have ended.
            Ask again with ``claim_verified``.
        refused: Why the run was not put in line (the line, or its shard, is at its limit).
    """

    verify: bool = False
    refused: str | None = None


class KeyLine(SlotLine):
    """One key value's line.

    Attributes:
        key: The digest of the key's value (`key_digest`), never the value: the lock's history
            outlives the runs of a data subject it served, and erasing the subject.
        wanted: Holders told that a run waits for their slot: they give it back when they end.
    """

    key: str = ""
    wanted: list[str] = Field(default_factory=list)

    @field_validator("key")
    @classmethod
    def _digested(cls, value: str) -> str:
        # A line carried over from before held the value itself: from here on only its digest.
        return key_digest(value)

    @property
    def quiet(self) -> bool:
        """Its runs leave without a word when nobody waits: the lock finds out itself."""
        return self.max_concurrent <= QUIET_LIMIT

    @property
    def full(self) -> bool:
        """No slot is free."""
        return len(self.holders) >= self.max_concurrent

    def unwanted(self) -> list[str]:
        """Holders not yet told that a run waits (none in a line whose runs always give back)."""
        return [holder for holder in self.holders if holder not in self.wanted] if self.quiet else []

    def drop(self, run_id: str) -> None:
        super().drop(run_id)
        self.wanted = [holder for holder in self.wanted if holder != run_id]


def entry_bytes(run_id: str) -> int:
    """About what one run in a line costs the shard's carried state (its id is kept up to three times)."""
    return 3 * len(run_id) + ENTRY_OVERHEAD


def carried_bytes(lines: dict[str, KeyLine]) -> int:
    """An upper estimate of what a shard's lines weigh in its continue-as-new input."""
    return sum(
        len(name) + len(line.key) + ENTRY_OVERHEAD + sum(entry_bytes(run_id) for run_id in (*line.holders, *line.queue))
        for name, line in lines.items()
    )


def line_refusal(lines: dict[str, KeyLine], line: KeyLine, run_id: str) -> str | None:
    """Why a starter may not put ``run_id`` in ``line`` now (None: it may)."""
    if len(line.queue) >= LINE_LIMIT:
        return f"{len(line.queue)} runs already wait in this key value's line (at most {LINE_LIMIT:,}); try later"
    if carried_bytes(lines) + entry_bytes(run_id) > SHARD_BUDGET:
        return (
            f"the lines of this key's lock shard are full (at most {SHARD_BUDGET:,} bytes of run ids "
            "wait in one shard); try later"
        )
    return None


def ceiling_refusal(lines: dict[str, KeyLine], run_id: str) -> str | None:
    """Why a run already started may not wait in a line of this shard (None: it may)."""
    carried = carried_bytes(lines)
    if carried + entry_bytes(run_id) <= SHARD_CEILING:
        return None
    return f"its lock shard already carries {carried:,} bytes of run ids in line (at most {SHARD_CEILING:,})"


async def refuse(run_id: str, lock: str, reason: str) -> None:
    """Tell ``run_id`` it cannot wait in the line of ``lock`` (``SLOT_REFUSED``): it ends, with ``reason``."""
    try:
        await workflow.get_external_workflow_handle(run_id).signal("SLOT_REFUSED", {"lock": lock, "reason": reason})
    except Exception:  # noqa: BLE001 - it ended meanwhile: nobody waits for the answer
        workflow.logger.warning("Key lock full: run %s (ended) could not wait in line at %s", run_id, lock)


async def tell_waiting(line: KeyLine, holder: str, payload: dict[str, Any], *, may_ask: bool) -> Told:
    """Tell ``holder`` that a run waits for its slot (``SLOT_WANTED``).

    Args:
        line: The holder's line.
        holder: The run.
        payload: The signal's payload (the lock).
        may_ask: Ask Temporal, with an activity, whether a holder that cannot take the signal
            within `CLAIM_GRACE` of its claim has ended or has not started yet (a claim may wait
            for that; a lock's main loop does not, and leaves it to a prompt holder check).
    """
    joined = line.since.get(holder)
    try:
        await workflow.get_external_workflow_handle(holder).signal("SLOT_WANTED", payload)
    except Exception:  # noqa: BLE001 - ended (its end is committed), or not started yet
        if joined is not None and workflow.now() - joined < CLAIM_GRACE:
            if not may_ask:
                return "unsure"
            try:
                found = await holder_states([holder], bounded=True)
            except Exception:  # noqa: BLE001 - Temporal did not say: it holds until the next check
                return "held"
            if holder not in found.ended:
                return "held"
        line.drop(holder)
        return "gone"
    if holder in line.holders and holder not in line.wanted:
        line.wanted.append(holder)
    return "held"
