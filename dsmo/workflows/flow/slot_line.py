"""SlotLine: who holds a lock's slots and who waits for one, first come first served.

Pure state, shared by the workflows that keep lines: an agent's rate limiter
(`engine/rate_limiter.py`, one line) and the key locks (`engine/key_locks.py`, a line per key
value). Nothing here talks to Temporal: the workflows decide when to grant and whom to signal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

    from dsmo.workflows.common.wire import WireModel

DEFAULT_PRIORITY = 3  # a run started without a priority, as Temporal's task queues count it


class ClaimAnswer(WireModel):
    """What a claim answered: the run holds a slot now, or who holds the key and who waits.

    Attributes:
        admitted: The run holds a slot now.
        holders: The runs holding the slots.
        waiting: How many runs wait in line ahead of it (in line by priority; without ``queue``,
            the whole line).
        queued: The runs in line it replaces, when the claim says it ``replaces`` them (a
            ``cancel-previous`` start, which cancels them with the holders). Left out when
            empty, so a starter from before it reads the answer as ever.
    """

    admitted: bool
    holders: list[str] = Field(default_factory=list)
    waiting: int = 0
    queued: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_empty_queued(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        if not dumped.get("queued"):
            dumped.pop("queued", None)
        return dumped


class SlotLine(WireModel):
    """A lock's slots: their holders and the runs in line for one.

    Attributes:
        max_concurrent: How many runs may hold a slot at once.
        holders: The runs holding a slot, in the order they got it.
        queue: The runs waiting for one, first in line first.
        since: When each holder got its slot, or a starter put a run in line (see `claim`).
        priorities: The priority of each run in line that has one (1 highest to 5; others 3).
    """

    max_concurrent: int = 1
    holders: list[str] = Field(default_factory=list)
    queue: list[str] = Field(default_factory=list)
    since: dict[str, datetime] = Field(default_factory=dict)
    priorities: dict[str, int] = Field(default_factory=dict)

    @property
    def idle(self) -> bool:
        """Nobody holds a slot or waits for one."""
        return not self.holders and not self.queue

    @property
    def blocked(self) -> bool:
        """Runs wait behind holders: the holders are worth checking."""
        return bool(self.queue and self.holders)

    def claim(self, run_id: str, request: dict[str, Any], now: datetime) -> tuple[ClaimAnswer, bool]:
        """Give ``run_id`` a slot now if one is free and nobody waits; else say who holds the key,
        and (with ``queue`` in ``request``) put it in line, so runs are served in the order they were
        started (by priority), or first with ``replaces`` (it replaces those in line).

        Returns:
            The answer, and whether the line changed.
        """
        if run_id in self.holders:
            return ClaimAnswer(admitted=True), False
        if len(self.holders) < self.max_concurrent and not self.queue:
            self.holders.append(run_id)
            self.since[run_id] = now
            return ClaimAnswer(admitted=True), True
        changed = False
        if request.get("queue") and run_id not in self.queue:
            if request.get("replaces"):
                # First in line, ahead of the runs it replaces: whichever cancel lands first, the
                # slot goes to it, and a run its starter never got to cancel runs after it.
                self.queue.insert(0, run_id)
                if request.get("priority") is not None:
                    self.priorities[run_id] = int(request["priority"])
            else:
                self.line_up(run_id, request.get("priority"))
            self.since[run_id] = now
            changed = True  # someone waits now: the holders are checked from here on
        ahead = self.queue.index(run_id) if run_id in self.queue else len(self.queue)
        replaced = self._in_line_before(run_id) if request.get("replaces") and run_id in self.queue else []
        return ClaimAnswer(admitted=False, holders=list(self.holders), waiting=ahead, queued=replaced), changed

    def _in_line_before(self, run_id: str) -> list[str]:
        """The runs in line that joined it before ``run_id`` did (one with no time kept counts as
        before): a retried claim that replaces them names the same runs, and none that came later."""
        joined = self.since.get(run_id)  # kept since its claim; never raise in the lock's handler
        return [
            queued
            for queued in self.queue
            if queued != run_id and (joined is None or self.since.get(queued, joined) <= joined)
        ]

    def line_up(self, run_id: str, priority: Any) -> None:
        """In line behind every run of the same or a higher priority (1 highest; none is 3)."""
        level = DEFAULT_PRIORITY if priority is None else int(priority)
        if priority is not None:
            self.priorities[run_id] = level
        ahead = [queued for queued in self.queue if self.priorities.get(queued, DEFAULT_PRIORITY) <= level]
        place = self.queue.index(ahead[-1]) + 1 if ahead else 0
        self.queue.insert(place, run_id)

    def drop(self, run_id: str) -> None:
        """``run_id`` holds no slot and waits for none."""
        self.holders = [held for held in self.holders if held != run_id]
        self.queue = [queued for queued in self.queue if queued != run_id]
        self.since.pop(run_id, None)
        self.priorities.pop(run_id, None)

    def next_holder(self) -> str | None:
        """The first run in line, now a holder, if a slot is free for it."""
        if not self.queue or len(self.holders) >= self.max_concurrent:
            return None
        run_id = self.queue.pop(0)
        self.priorities.pop(run_id, None)
        self.holders.append(run_id)
        return run_id
