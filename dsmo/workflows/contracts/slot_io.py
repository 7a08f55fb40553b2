"""What a run and a lock (`engine/rate_limiter.py`) exchange through activities: slots asked for and given back."""

from __future__ import annotations

from pydantic import Field

from dsmo.workflows.common.wire import WireModel


class SlotRequest(WireModel):
    """A run asks a lock for a slot, or gives one back.

    Attributes:
        agent: The agent (its `rateLimit`), or the owner of a concurrency key's slots.
        run_id: The run.
        max_concurrent: How many runs the lock lets hold a slot at once.
        lock: The lock's workflow id, for a concurrency key (None: the agent's `rateLimit`).
        key: The key's value, for a concurrency key.
        priority: The run's priority (1 highest to 5), if it was started with one: its place in line.
    """

    agent: str
    run_id: str
    max_concurrent: int = 1
    lock: str | None = None
    key: str | None = None
    priority: int | None = None


class TokenRequest(WireModel):
    """A run asks a throttle key value's bucket for a token (see `engine/throttle_bucket.py`).

    Attributes:
        bucket: The bucket's workflow id.
        owner: Whose throttle it is (the agent, or ``agent.node``).
        key: The key's value.
        run_id: The run.
        limit: Tokens per period.
        period_seconds: The period.
        burst: The most tokens the bucket holds.
    """

    bucket: str
    owner: str
    key: str
    run_id: str
    limit: int
    period_seconds: float
    burst: int = 1


def delivery_key(run_id: str, event_id: str) -> str:
    """Where a starter keeps a start it delivered to ``run_id`` (``onBusy: deliver``), for a hand-on."""
    return f"deliveries/{run_id}/{event_id}.json"


class HandOn(WireModel):
    """A run with ``onBusy: deliver`` ends with delivered events it never took: start runs for them."""

    run_id: str
    event_ids: list[str]


class HandedOn(WireModel):
    """The runs started for the events handed on, by event id (an event with no start record is left)."""

    runs: dict[str, str] = Field(default_factory=dict)


CHECK_HOLDERS = "check_holders"


class HolderCheck(WireModel):
    """A lock asks which of its holders have ended (terminated, reset) without giving their slot back."""

    runs: list[str]


class HolderStates(WireModel):
    """Which holders a lock asked about are not running: ended, or not found (not started yet, or gone)."""

    ended: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
