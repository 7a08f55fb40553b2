"""A call to the queue's PostgreSQL that waits for the server to come back from a restart.

Table 1 restarts the queue's server mid-workload in W3 and W4 (`bench.restarts`): every open
connection breaks. The execution log, the bench's own reads and its first enqueues of a run wait
for the server and go on, as a client with a reconnecting pool would; a consumer's other calls
fail, and the message in hand is redelivered after its visibility timeout (`bench.consumer`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import psycopg

RECONNECT_S = 0.2
RIDE_OUT_S = 60.0  # a call waits this long for the server to come back, at most
P = ParamSpec("P")
T = TypeVar("T")


class Resettable(Protocol):
    """Something holding a connection it can drop (`bench.queue_db.QueueDb`)."""

    def reset(self) -> None:
        """Drop the connection: the next call opens another."""


D = TypeVar("D", bound=Resettable)


def reconnecting(method: Callable[Concatenate[D, P], T]) -> Callable[Concatenate[D, P], T]:
    """``method`` tried again on a new connection while the server is away, for `RIDE_OUT_S` at most."""

    def again(db: D, *args: P.args, **kwargs: P.kwargs) -> T:
        deadline = time.monotonic() + RIDE_OUT_S
        while True:
            try:
                return method(db, *args, **kwargs)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                db.reset()
                time.sleep(RECONNECT_S)

    return functools.wraps(method)(again)  # type: ignore[return-value]
