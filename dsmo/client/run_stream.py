"""A run's live stream: its audit trail as it grows, with its model's tokens as they arrive.

The stream is a view, read from what the run already keeps: the trail (in order, by sequence
number) and the progress chunks its stage attempts write under its artifacts (a model's tokens,
a plugin agent's reports: `activities/progress_log.py`). Nothing goes through the run's workflow, so following a run
costs it no history and no server write. Each item carries an ``id``, a cursor that says where
the stream is after it: the trail's sequence number, and how far into each stage attempt still
open the reader has read. Passing it back (``after``, or SSE's ``Last-Event-ID``) resumes after
that item: what was missed comes first, then what happens next, nothing twice.

An attempt that ends without committing (a worker lost mid-call, a failed call) is followed to
its end, then marked ``abandoned``: its tokens are not the answer. The retried attempt begins
with an ``attempt`` item. A position given back is first read against the trail
(`checked_cursor`): one this stream could not have given (from another run, past the end,
naming an attempt never begun or already over) is refused, never followed.

Longer than most modules: the cursor, its check against the trail and the stream itself share
one rule of where an attempt begins and ends (`begins_attempt`, `ends_attempt`); kept together, the three
cannot disagree on it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore
from dsmo.activities.progress_log import progress_folder, progress_key
from dsmo.client import trail_pages
from dsmo.client.client_errors import NoWorker, RunNotStarted
from dsmo.client.core import ClientCore
from dsmo.workflows.contracts.run_records import ENDING_EVENTS, AuditEvent

POLL_SECONDS = 0.2  # how often a stream looks for new items while its run is active
QUIET_POLL_SECONDS = 2.0  # how often it asks a run that has been quiet for a while
QUIET_CHECKS = 3  # quiet looks before a stream also asks Temporal whether the run has ended
WORKER_WAIT_SECONDS = 1.0  # how long a stream waits when no worker answers for the run
# The trail events that end a stage attempt (`STAGE_ENQUEUED` of another attempt ends it too).
ATTEMPT_ENDS = frozenset({"STAGE_SUCCEEDED", "STAGE_FAILED", "DEAD_LETTERED"})
PROGRESS_KINDS = frozenset({"token", "progress"})  # what a stage's chunks may hold
_OPEN = re.compile(r"^([A-Za-z0-9_.-]{1,200})@([0-9a-f]{1,64})@([0-9]{1,6})=([0-9]{1,9})\.([0-9]{1,6})$")
MAX_OPEN = 64  # attempts one cursor may name (parallel stages of one run)
# Pages of the trail (of `trail_pages.MAX_LIMIT` events) read back from a position to find the
# attempts it names: an attempt open across more events than that is not taken as one.
CHECKED_PAGES = 10


class BadCursor(ValueError):
    """A stream cursor (``after``, ``Last-Event-ID``) that is not one this stream gave."""


@dataclass
class OpenAttempt:
    """A stage attempt the reader follows: where its chunks are, and how far it has read."""

    stage: str
    version: str
    key: str
    attempt: int
    chunk: int = 0
    item: int = 0

    @property
    def name(self) -> str:
        return f"{self.stage}@{self.key}@{self.attempt}"


@dataclass
class StreamCursor:
    """Where a reader is: the last trail event it got, and how far into each open attempt.

    Attributes:
        seq: The sequence number of the last trail event read (0: none yet).
        attempts: The attempts still open, by ``stage@idempotency key@attempt``.
    """

    seq: int = 0
    attempts: dict[str, OpenAttempt] = field(default_factory=dict)

    def id(self) -> str:
        """The cursor as text: an item's ``id``."""
        parts = [str(self.seq)]
        parts += [f"{a.stage}@{a.key}@{a.attempt}={a.chunk}.{a.item}@{a.version}" for a in self.attempts.values()]
        return ";".join(parts)

    @classmethod
    def parse(cls, text: str | None) -> StreamCursor:
        """The cursor an item's ``id`` names (None or empty: the stream's start).

        Raises:
            BadCursor: It is not an id this stream gave.
        """
        if not text:
            return cls()
        seq, *opened = text.split(";")
        if not re.fullmatch(r"[0-9]{1,12}", seq) or len(opened) > MAX_OPEN:  # ASCII digits only
            raise BadCursor(f"after: {text[:80]!r} is not a stream position (an item's id)")
        cursor = cls(seq=int(seq))
        for part in opened:
            where, _, version = part.rpartition("@")
            found = _OPEN.fullmatch(where)
            if found is None or not re.fullmatch(r"[0-9a-f]{1,64}", version):
                raise BadCursor(f"after: {part[:80]!r} is not an attempt's position")
            stage, key, attempt, chunk, item = found.groups()
            followed = OpenAttempt(stage, version, key, int(attempt), int(chunk), int(item))
            cursor.attempts[followed.name] = followed
        return cursor


@dataclass(frozen=True)
class StreamItem:
    """One item of a run's live stream.

    Attributes:
        id: Where the stream is after this item: pass it as ``after`` to resume after it.
        kind: ``event`` (an audit event: ``data`` is the event), ``attempt`` (a stage attempt
            began: ``stage``, ``attempt``, ``retry``), ``token`` (a piece of a model's answer as it
            arrived: ``stage``, ``attempt``, ``text``, ``call``), ``progress`` (what a plugin agent
            reported with `dsmo.progress`), ``abandoned`` (an attempt ended without committing:
            its tokens are not the answer) or ``end`` (the run has ended; nothing follows).
        data: What the item says.
    """

    id: str
    kind: str
    data: dict[str, Any]


async def follow(
    core: ClientCore, run_id: str, *, after: str | None = None, checked: bool = False
) -> AsyncIterator[StreamItem]:
    """A run's stream from ``after`` (None: its start), until the run has ended.

    While no worker answers for a run that has not ended (none is up, or one died and the next
    has not taken over), the stream waits for one.

    Args:
        core: The client's connections.
        run_id: The run.
        after: An item's id: the stream resumes right after that item.
        checked: ``after`` was checked with `checked_cursor` already (by a server, before it
            began to answer): it is not read against the trail again.

    Raises:
        BadCursor: ``after`` is not an id this run's stream gave.
        RunNotFound: No run has this id.
    """
    # A running run's trail is asked of the run; an ended run's is read from its export (no worker
    # replays it). Temporal is asked which, when the stream opens and when the run goes quiet.
    ended_run = await core.has_ended(run_id)
    cursor = StreamCursor.parse(after) if checked else await checked_cursor(core, run_id, after, ended=ended_run)
    store = core.artifacts
    if cursor.seq > 0 and ended_run and await _ended_at(core, run_id, cursor.seq):  # resumed after the end
        for followed in list(cursor.attempts.values()):
            async for item in _drain(store, run_id, cursor, followed, ending=None):
                yield item
        yield StreamItem(cursor.id(), "end", {"seq": cursor.seq})
        return
    clock = asyncio.get_running_loop()
    trail_due, quiet, ended_outside = 0.0, 0, False
    while True:
        events: list[AuditEvent] = []
        if clock.time() >= trail_due:
            try:
                page = await trail_pages.trail_page(
                    core, run_id, after=cursor.seq, limit=trail_pages.MAX_LIMIT, live=not ended_run
                )
            except (RunNotStarted, NoWorker):
                # Not started yet, or between workers (one died; the next takes the run over): a
                # stream outlives both, and goes on where it was. An ended run is read from the store.
                ended_run = await core.has_ended(run_id)
                if not ended_run:
                    await asyncio.sleep(WORKER_WAIT_SECONDS)
                continue
            events = page.events
            # A run that ended without a trail event saying so (terminated from outside, timed out
            # by Temporal) still ends its stream: a quiet run is asked whether it has ended, and
            # its trail read once more from the store before the end.
            if not events and quiet >= QUIET_CHECKS and await core.has_ended(run_id):
                ended_outside, ended_run = ended_run, True
            # A quiet run is asked less and less often (up to every `QUIET_POLL_SECONDS`): many
            # readers of runs that wait cost their workers little.
            quiet = 0 if events else quiet + 1
            trail_due = clock.time() + min(POLL_SECONDS * 2 ** min(quiet, 4), QUIET_POLL_SECONDS)
        ended = False
        for event in events:
            for followed in [a for a in cursor.attempts.values() if a.stage == event.stage]:
                # What the attempt wrote comes before what the trail says of its stage since (a
                # commit's STAGE_STARTED is recorded after the answer streamed), after the event
                # that begins it (a reader resuming right after its announcement reads that next).
                if begins_attempt(event, followed):
                    continue
                if ends_attempt(event, followed):
                    async for item in _drain(store, run_id, cursor, followed, ending=event):
                        yield item
                else:
                    async for item in _tokens(store, run_id, cursor, followed):
                        yield item
            began = attempt_begun_by(event)
            if began is not None and began.name not in cursor.attempts:
                # Announced before the event that begins it, with a position of its own: a reader
                # resuming after it reads the event next (the attempt, known, is not announced again).
                cursor.attempts[began.name] = began
                retry = began.attempt > 1
                yield StreamItem(
                    cursor.id(), "attempt", {"stage": began.stage, "attempt": began.attempt, "retry": retry}
                )
            cursor.seq = event.seq
            yield StreamItem(cursor.id(), "event", event.model_dump(mode="json", by_alias=True))
            ended = ended or event.type in ENDING_EVENTS
        read = 0
        for followed in list(cursor.attempts.values()):
            async for item in _tokens(store, run_id, cursor, followed):
                read += 1
                yield item
        if ended or ended_outside:
            for followed in list(cursor.attempts.values()):
                async for item in _drain(store, run_id, cursor, followed, ending=None):
                    yield item
            yield StreamItem(cursor.id(), "end", {"seq": cursor.seq})
            return
        if read:  # a stage is writing: its end is near, look at the trail soon again
            quiet, trail_due = 0, min(trail_due, clock.time() + POLL_SECONDS)
        if not events and not read:
            wait = POLL_SECONDS if cursor.attempts else max(trail_due - clock.time(), 0.0)
            await asyncio.sleep(max(wait, 0.01))


async def checked_cursor(
    core: ClientCore, run_id: str, after: str | None, *, ended: bool | None = None
) -> StreamCursor:
    """The position ``after`` names, once the run's trail shows this stream could have given it:
    its event is in the trail, and each attempt it names began by then (its ``STAGE_ENQUEUED``, at
    most one event later: an attempt is announced before the event that begins it) and had not
    ended. A position from another run, from the future or forged is refused, not followed.

    Args:
        core: The client's connections.
        run_id: The run.
        after: An item's id (None: the stream's start).
        ended: Whether Temporal has the run ended (None: asked here).

    Raises:
        BadCursor: ``after`` is not a position of this run's stream.
    """
    cursor = StreamCursor.parse(after)
    if cursor.seq == 0 and not cursor.attempts:
        return cursor
    live = not (await core.has_ended(run_id) if ended is None else ended)
    unseen, over = dict(cursor.attempts), set()
    before: int | None = cursor.seq + 2
    for _ in range(CHECKED_PAGES):
        if before is None or not (unseen or before == cursor.seq + 2):
            break
        try:
            page = await trail_pages.trail_page(core, run_id, before=before, limit=trail_pages.MAX_LIMIT, live=live)
        except (RunNotStarted, NoWorker):
            return cursor  # the run cannot say now; the stream waits for it as it would anyway
        if before == cursor.seq + 2 and page.total < cursor.seq:
            raise BadCursor(f"after: {cursor.seq} is past the end of run {run_id}'s trail ({page.total} events)")
        for event in reversed(page.events):  # newest first: an attempt's end comes before its start
            for followed in list(unseen.values()):
                if begins_attempt(event, followed):
                    if followed.name in over:
                        raise BadCursor(f"after: attempt {followed.name} had ended by {cursor.seq}")
                    del unseen[followed.name]
                elif event.seq <= cursor.seq and ends_attempt(event, followed):
                    over.add(followed.name)
        before = page.previous_before
    if unseen:
        raise BadCursor(f"after: run {run_id} began no attempt {next(iter(unseen))} by {cursor.seq}")
    return cursor


async def _ended_at(core: ClientCore, run_id: str, seq: int) -> bool:
    """Whether the ended run's trail event ``seq`` is its last (read from its export)."""
    try:
        page = await trail_pages.trail_page(core, run_id, after=seq - 1, limit=1)
    except (RunNotStarted, NoWorker):
        return False
    return bool(page.events) and page.events[0].type in ENDING_EVENTS


def attempt_begun_by(event: AuditEvent) -> OpenAttempt | None:
    """The stage attempt a `STAGE_ENQUEUED` event begins, if it is one (its progress: a model's
    tokens, a plugin's reports)."""
    if event.type != "STAGE_ENQUEUED" or event.stage is None:
        return None
    key = event.data.get("idempotencyKey")
    if not isinstance(key, str):
        return None
    return OpenAttempt(event.stage, event.workflow_version, key, event.attempt or 1)


def begins_attempt(event: AuditEvent, followed: OpenAttempt) -> bool:
    """Whether ``event`` is the `STAGE_ENQUEUED` that begins ``followed``."""
    began = attempt_begun_by(event)
    return began is not None and (began.name, began.version) == (followed.name, followed.version)


def ends_attempt(event: AuditEvent, followed: OpenAttempt) -> bool:
    """Whether ``event`` ends ``followed``: its success, failure or dead letter, or another
    attempt or visit of its stage beginning (not the event that begins it)."""
    if event.stage != followed.stage or begins_attempt(event, followed):
        return False
    if event.type == "STAGE_ENQUEUED":
        return True  # the next attempt, or the stage's next visit
    return event.type in ATTEMPT_ENDS


async def _tokens(
    store: ArtifactStore, run_id: str, cursor: StreamCursor, followed: OpenAttempt
) -> AsyncIterator[StreamItem]:
    """The attempt's items written since the reader last looked (the chunks there are now)."""
    folder = progress_folder(followed.version, run_id, followed.key, followed.attempt)
    while True:
        try:
            chunk = await asyncio.to_thread(store.read_json, store.uri(progress_key(folder, followed.chunk)))
        except ArtifactMissing:
            return
        items = chunk.get("items", []) if isinstance(chunk, dict) else []
        for item in items[followed.item :]:
            followed.item += 1
            kind = item.get("kind")
            yield StreamItem(
                cursor.id(),
                kind if kind in PROGRESS_KINDS else "progress",
                {**item, "stage": followed.stage, "attempt": followed.attempt},
            )
        # After the last chunk the next is never written: the trail says when the attempt ended.
        followed.chunk, followed.item = followed.chunk + 1, 0
        if chunk.get("last"):
            return


async def _drain(
    store: ArtifactStore, run_id: str, cursor: StreamCursor, followed: OpenAttempt, *, ending: AuditEvent | None
) -> AsyncIterator[StreamItem]:
    """An attempt the trail says has ended: the rest of its items, then whether it was abandoned."""
    async for item in _tokens(store, run_id, cursor, followed):
        yield item
    committed = ending is not None and ending.type == "STAGE_SUCCEEDED" and ending.attempt == followed.attempt
    if cursor.attempts.pop(followed.name, None) is not None and not committed:
        yield StreamItem(cursor.id(), "abandoned", {"stage": followed.stage, "attempt": followed.attempt})
