"""The run's search attributes, written at most once per workflow task where it can.

Every upsert is a visibility write on the server, its most expensive kind of transaction after
the workflow task itself. A run often changes its status several times in one workflow task:
an event kept in the inbox takes a wait at once (WAITING then RUNNING), a resumed run runs its
local stages and ends (RUNNING then COMPLETED). Merged, the writes asked in one activation
become one, made when the run's code yields and holding only what differs from what the search
attributes already show (none at all when nothing differs); a write asked before a local
activity waits for it, since the server sees a workflow task's commands only when the task
completes (or heartbeats, every 8 s, when local activities keep it open: then the write shows
up to an attempt later than it was asked, never more).

A run started for this code (its request carries ``generation``: common/patches.py) merges
from its start, at no cost. Any other run's history keeps how it wrote: `workflow.patched`
answers from it on replay, and such a run merges from the first place that asks after the
upgrade. The patch is asked only where merging pays for its marker: by a run whose short stages
run locally (the same patch decides that) and by a wait that may be taken from the inbox at once.
Other runs of that kind write each change as it comes, as before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from dsmo.workflows.common import patches

# workflow.patched id: merged status writes, and short stages as local activities
# (definition/local_stages.py). One marker for both.
FEWER_WRITES_PATCH = "fewer-server-writes"


@dataclass
class StatusWrites:
    """This execution's writes of its search attributes (one per run generation, never carried)."""

    # Whether this execution merges its writes: None until a place that gains from it asks.
    merged: bool | None = None
    # The values asked for and not written yet, by attribute name (the last one asked wins).
    due: dict[str, SearchAttributeUpdate[Any]] = field(default_factory=dict, repr=False)
    scheduled: bool = False
    held: int = 0  # local activities in flight: a due write waits for them

    def merge_from_now(self) -> bool:
        """Merge this execution's writes from here on, unless its history says it did not.

        Returns:
            Whether the patch is granted (its marker written, or found in the history replayed).
        """
        if self.merged is None:
            self.merged = patches.patched(FEWER_WRITES_PATCH)
        return self.merged

    def write(self, updates: list[SearchAttributeUpdate[Any]]) -> None:
        """Write ``updates``: now, or merged with the others asked before the run yields."""
        if not self.merged:
            workflow.upsert_search_attributes(updates)
            return
        self.due.update({update.key.name: update for update in updates})
        self._schedule()

    def hold(self) -> None:
        """A local activity starts: a write due now waits until it is done."""
        self.held += 1

    def release(self) -> None:
        """The local activity is done: make the due write when the run next yields."""
        self.held -= 1
        if self.due:
            self._schedule()

    def _schedule(self) -> None:
        if not self.scheduled and not self.held:
            self.scheduled = True
            # Runs after the current step of the run's code, within the same activation. The
            # values are computed already: what runs here cannot fail on the run's state.
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self.scheduled = False
        if self.held or not self.due:
            return
        shown = workflow.info().typed_search_attributes  # the SDK keeps it current after each upsert
        changed = [update for update in self.due.values() if shown.get(update.key) != update.value]
        self.due = {}
        if changed:
            workflow.upsert_search_attributes(changed)
