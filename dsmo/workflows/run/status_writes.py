"""The run's search attributes, written at most once per workflow task where it can.

Every upsert is a visibility write on the server, its most expensive kind of transaction after
the workflow task itself. A run often changes its status several times in one workflow task:
an event kept in the inbox takes a wait at once (WAITING then RUNNING), a resumed run runs its
local stages and ends (RUNNING then COMPLETED). Merged, the writes asked in one activation
become one, made when the run's code yields and holding only what differs from what the search
attributes already show (none at all when nothing differs); a write asked before a local
activity waits for it, since nothing of the workflow task reaches the server before its end.

Runs that started before this wrote each change as it came; `workflow.patched` keeps them so.
The patch is asked only where merging pays for its marker: by a run whose short stages run
locally (the same patch decides that) and by a wait that may be taken from the inbox at once.
Other runs write each change as it comes, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

# workflow.patched id: merged status writes, and short stages as local activities
# (definition/local_stages.py). One marker for both.
FEWER_WRITES_PATCH = "fewer-server-writes"

Updates = Callable[[], list[SearchAttributeUpdate[Any]]]


@dataclass
class StatusWrites:
    """This execution's writes of its search attributes (one per run generation, never carried)."""

    # Whether this execution merges its writes: None until a place that gains from it asks.
    merged: bool | None = None
    # What the search attributes show (name -> value; None for unset), as of this execution's
    # start and its own writes since; read at the first merged write.
    shown: dict[str, Any] | None = None
    # The write asked for and not made yet, computed when it is made (from the state then).
    due: Updates | None = field(default=None, repr=False)
    scheduled: bool = False
    held: int = 0  # local activities in flight: a due write waits for them

    def merge_from_now(self) -> bool:
        """Merge this execution's writes from here on, unless it started before merging existed.

        Returns:
            Whether the patch is granted (its marker written, or found in the history replayed).
        """
        if self.merged is None:
            self.merged = workflow.patched(FEWER_WRITES_PATCH)
        return self.merged

    def write(self, updates: Updates) -> None:
        """Write what ``updates`` returns: now, or merged once the run yields."""
        if not self.merged:
            workflow.upsert_search_attributes(updates())
            return
        self.due = updates
        self._schedule()

    def hold(self) -> None:
        """A local activity starts: a write due now waits until it is done."""
        self.held += 1

    def release(self) -> None:
        """The local activity is done: make the due write when the run next yields."""
        self.held -= 1
        if self.due is not None:
            self._schedule()

    def _schedule(self) -> None:
        if not self.scheduled and not self.held:
            self.scheduled = True
            # Runs after the current step of the run's code, within the same activation.
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self.scheduled = False
        updates = self.due
        if updates is None or self.held:
            return
        self.due = None
        if self.shown is None:
            self.shown = {pair.key.name: pair.value for pair in workflow.info().typed_search_attributes}
        changed = [update for update in updates() if self.shown.get(update.key.name) != update.value]
        if changed:
            self.shown.update({update.key.name: update.value for update in changed})
            workflow.upsert_search_attributes(changed)
