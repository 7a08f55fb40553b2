"""`workflow.patched` for DSMO's changes: none for runs started for this code, one marker for others.

Each `workflow.patched` id a run asks writes a marker to its history and has the SDK upsert
Temporal's ``TemporalChangeVersion`` search attribute: two server writes per change, paid again by
every new run for as long as the check stays in the code. A run whose request carries
``generation`` (`GENERATION`: a DSMO starter sets it, and the run sets it for its next execution)
takes every change in `GENERATION_CHANGES` without asking: the request is in its history, so a
replay decides the same, and a worker older than the field refuses the request instead of running
it another way. The runs DSMO's own code starts carry it too (a child run, a debounced batch's
run, a run a delivered message was handed on to). Any other run (started by an older starter or
a raw Temporal start) reaches the first of those changes and asks `GENERATION_PATCH` instead;
once that is granted every id in `GENERATION_CHANGES` is granted with it, without a marker of
its own.

Replays keep their commands. A history written before the generation has no generation marker,
so on replay the generation is refused (memoized for the execution, as the SDK memoizes every
patch) and each change is asked by its own id, as that history was written. The generation is
asked where the first change would have been, so runs that reach no change still write none.

A change added later is not in `GENERATION_CHANGES` (runs of this generation did not have it):
it goes in `REVISION_CHANGES` with the next `REVISION`. A run whose request carries ``revision``
(a DSMO starter sets it, and the run for its next execution) at least that high takes it without
a marker; any other run asks it by its own id. Unlike ``generation``, ``revision`` has an upper
bound: a worker whose code lacks a revision refuses a request that claims it (as one older than
the field does), instead of running it without the change and leaving a history a newer worker
cannot replay.
"""

from __future__ import annotations

from temporalio import workflow

GENERATION = 1
GENERATION_PATCH = f"dsmo-generation-{GENERATION}"

# Every change the generation stands for: a run that has its marker was written by code that
# has all of them. Never add an id here once released; a later change starts a next generation.
GENERATION_CHANGES = frozenset(
    {
        "replay-recorded-actions",
        "sealed-action-output",
        "regrant-holders",
        "throttle-owed-tokens",
        "key-lock-refusals",
        "move-into-wait",
        "move-asked-after-the-last-boundary",
        "cancel-while-handing-over",
        "strict-run-id",
        "run-budget-before-visit-limits",
        "render-wait-parameters",
        "timeout-ends-before-its-actions",
        "replay-no-dead-letter",
        "fewer-server-writes",
        "condition-cost-bound",
        "bounded-inbox-judging",
        "event-inbox",
        "trail-segments",
        "event-size-cap",
        "strict-signals",
        "strict-signal-rules-first",
        "signal-json-numbers",
        "signalled-slot-release",
        "sharded-key-locks",
        "ending-says-so",
        "spend-search-attributes",
    }
)


# Changes made since the generation, each with the revision that brought it; never renumbered.
REVISION = 7
REVISION_CHANGES = {
    "hand-over-after-a-round-trip": 1,
    "settle-past-a-cancel": 2,
    "fork-live-on-the-version-now": 3,
    "paid-spend-only": 4,
    "step-ends-before-cancel": 5,
    "wait-retry-keeps-received": 6,
    "update-recorded-before-local-stages": 7,
}
# What a run's next execution is started for (its request's fields): every change of this code.
NEXT_EXECUTION = {"generation": GENERATION, "revision": REVISION}


def patched(change: str) -> bool:
    """Whether this execution takes ``change``'s new path (`workflow.patched`, one marker a run).

    Args:
        change: The change's `workflow.patched` id.

    Returns:
        True for a run written by code that has the change (its request's generation or
        revision, its generation's marker, or the change's own marker, written now or found in
        the history replayed); False for a history written before it.
    """
    if change in GENERATION_CHANGES and (started_in_generation() or workflow.patched(GENERATION_PATCH)):
        return True
    revision = REVISION_CHANGES.get(change)
    if revision is not None and _request_says("revision", revision):
        return True
    return workflow.patched(change)


def started_in_generation() -> bool:
    """Whether this execution's request says it was started for this generation's code."""
    return _request_says("generation", GENERATION)


def _request_says(field: str, at_least: int) -> bool:
    # The run's workflow object keeps the field from its request; DSMO's helper workflows have none.
    return (getattr(workflow.instance(), field, None) or 0) >= at_least
