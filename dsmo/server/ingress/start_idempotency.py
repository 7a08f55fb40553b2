"""What makes a start over HTTP one start: its `Idempotency-Key` and the key's event rate.

One (API key, `Idempotency-Key`) pair names one run, whatever the body (`idempotent_run_id`):
Temporal never reuses a run id while it keeps the run, so the pair holds to one start with no
store of its own, and the run's memo keeps a digest of the start that made it, which a retry is
compared with. A start's events count against the same per-key rate as events sent on their own.
"""

from __future__ import annotations

import hashlib
import json
import math

from dsmo.client.client_errors import RunNotFound
from dsmo.client.dsmo_client import DsmoClient
from dsmo.server.api_keys import ApiKey
from dsmo.server.ingress.bodies import StartRequest
from dsmo.server.ingress.problems import Problem
from dsmo.server.token_buckets import TokenBuckets


class RateLimited(Problem):
    """429 `rate_limited`, answered with a `Retry-After` header (`app.py` installs the handler).

    Args:
        message: One line for a person.
        retry_after: Whole seconds until the call may go ahead.
    """

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(429, "rate_limited", message)
        self.retry_after = retry_after


def within_event_rate(rate: TokenBuckets, key: ApiKey, count: int) -> None:
    """Count ``count`` events against the key's event rate, or refuse them all (`RateLimited`)."""
    wait = rate.take(key.name, count)
    if wait > 0:
        retry_after = max(1, math.ceil(wait))
        raise RateLimited(
            f"events: key {key.name!r} sends events faster than its limit ({count} in this start); "
            f"retry in {retry_after} s",
            retry_after,
        )


# The run's memo keeps which start made it: a digest of the key, its Idempotency-Key and the body.
START_MEMO = "ingressStart"


def idempotent_run_id(key: ApiKey, idempotency_key: str) -> str:
    """The id of the run one (API key, Idempotency-Key) pair starts: the pair's alone, whatever the body.

    Temporal never reuses a run id while it keeps the run (its namespace's retention), so the
    pair names one start for that long, across restarts of the ingress, with no store of its own.
    """
    digest = hashlib.sha256(f"{key.name}\x1f{idempotency_key}".encode()).hexdigest()[:24]
    return f"idem-{digest}"


def start_fingerprint(key: ApiKey, idempotency_key: str, body: StartRequest) -> str:
    """One start, as its caller sent it: a retry of it has the same digest, any other start another."""
    sent = body.model_dump(mode="json", by_alias=True)
    text = json.dumps([key.name, idempotency_key, sent], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


async def kept_start(dsmo: DsmoClient, run_id: str) -> str | None:
    """The digest the start that made ``run_id`` kept in its memo; None for a run that keeps none.

    Raises:
        RunNotFound: Temporal has no run ``run_id``.
    """
    kept = (await (await dsmo.run(run_id).describe()).memo()).get(START_MEMO)
    return kept if isinstance(kept, str) else None


async def same_start_as_run(dsmo: DsmoClient, run_id: str, start: str | None, *, idempotency_key: str) -> None:
    """`same_start`, asking the run Temporal has under ``run_id`` for its start's digest.

    Raises:
        Problem: 409: another start made it, or it ended long ago (Temporal forgot it; the store
            keeps its trail, so its id is not reused).
    """
    try:
        kept = await kept_start(dsmo, run_id)
    except RunNotFound:
        raise Problem(
            409,
            "run_exists",
            f"Idempotency-Key: {idempotency_key!r} started run {run_id!r}, which has ended and whose "
            "audit trail is kept; send a new Idempotency-Key for a new start",
        ) from None
    same_start(run_id, kept, start, idempotency_key=idempotency_key)


def same_start(run_id: str, kept: str | None, start: str | None, *, idempotency_key: str) -> None:
    """Return if the existing ``run_id`` was made by this very start (a retry); else refuse with 409."""
    if kept is not None and kept == start:
        return
    if kept is None:  # a run another request named with this id (an explicit runId)
        message = f"runId: run {run_id!r} already exists, started by another request; choose another runId"
    else:
        message = (
            f"Idempotency-Key: {idempotency_key!r} already started run {run_id!r} with another body "
            "(agent, version, input, events or priority); send a new Idempotency-Key for a new start"
        )
    raise Problem(409, "run_exists", message)


def start_event_id(idempotency_key: str | None, index: int) -> str | None:
    """A start's event without an id: derived from the start's Idempotency-Key, so a retry repeats it."""
    return f"{idempotency_key}.{index}" if idempotency_key else None
