"""The run's search attributes, written at most once per activation and only where they changed.

Every upsert is a visibility write on the server, its most expensive kind of transaction after
the workflow task itself. A run often changes its status several times in one activation: an
event kept in the inbox takes a wait at once (WAITING then RUNNING), a resumed run runs its
local stages and ends (RUNNING then COMPLETED). Each change asks for a write; the writes asked
in one activation are merged into one, made when the run's code yields, holding what differs
from what the search attributes already show (none at all when nothing differs).

Runs that started before this wrote each change as it came; `workflow.patched` keeps them so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

# workflow.patched id: one status write per activation, and short stages as local activities
# (definition/local_stages.py). One marker for both, asked by every run started on this code.
FEWER_WRITES_PATCH = "fewer-server-writes"

Updates = Callable[[], list[SearchAttributeUpdate[Any]]]


@dataclass
class StatusWrites:
    """This execution's writes of its search attributes (one per run generation, never carried)."""

    # Whether this execution merges its writes; asked once, at its first write.
    merged: bool | None = None
    # What the search attributes show (name -> value; None for unset), as of this execution's
    # start and its own writes since.
    shown: dict[str, Any] | None = None
    # The write asked for in this activation, computed when the run yields (so from the state
    # it has then); None when none is due.
    due: Updates | None = field(default=None, repr=False)

    def write(self, updates: Updates) -> None:
        """Write what ``updates`` returns: now (older runs), or once this activation yields."""
        if self.merged is None:
            self.merged = workflow.patched(FEWER_WRITES_PATCH)
        if not self.merged:
            workflow.upsert_search_attributes(updates())
            return
        scheduled = self.due is not None
        self.due = updates
        if not scheduled:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """The merged write: what differs from what the search attributes show, if anything."""
        updates, self.due = self.due, None
        if updates is None:
            return
        if self.shown is None:
            self.shown = {pair.key.name: pair.value for pair in workflow.info().typed_search_attributes}
        changed = [update for update in updates() if self.shown.get(update.key.name) != update.value]
        if changed:
            self.shown.update({update.key.name: update.value for update in changed})
            workflow.upsert_search_attributes(changed)
