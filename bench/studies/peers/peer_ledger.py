"""The external ledger every contender's agents write, and the crash counts read from it.

A plain PostgreSQL table with no unique key: a stage executed twice writes two rows, an effect
applied twice writes two ``effect`` rows. Beside it a receiver that dedupes by a unique key: the
send also delivers its effect there under the engine's documented idempotency key, and a second
delivery under the same key is counted, not applied. Its own database (not the peers' state
database), so the ledger's writes are not counted as LangGraph's or DBOS's work.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    contender text NOT NULL, run_id text NOT NULL, stage text NOT NULL, kind text NOT NULL,
    detail text NOT NULL DEFAULT '', at double precision NOT NULL, pid int NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger (run_id);
CREATE INDEX IF NOT EXISTS ledger_kind_at ON ledger (kind, at);
CREATE TABLE IF NOT EXISTS receiver (
    key text PRIMARY KEY, contender text NOT NULL, run_id text NOT NULL, detail text NOT NULL DEFAULT '',
    at double precision NOT NULL, deliveries int NOT NULL DEFAULT 1);
CREATE INDEX IF NOT EXISTS receiver_run ON receiver (contender, run_id);
"""

# Row kinds: a stage began, its work was done, the run's effect (the send) applied, a planned kill.
START, DONE, EFFECT, KILL = "start", "done", "effect", "kill"
REPLIED, TIMED_OUT = "reply", "timeout"  # an effect's detail: what ended the wait


class Ledger:
    """Writes to the ledger, one autocommit connection per thread."""

    def __init__(self, dsn: str, contender: str) -> None:
        self.dsn = dsn
        self.contender = contender
        self._local = threading.local()

    def _conn(self) -> psycopg.Connection[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(self.dsn, autocommit=True)
            self._local.conn = conn
        return conn

    def write(self, run_id: str, stage: str, kind: str, detail: str = "") -> None:
        self._conn().execute(
            "INSERT INTO ledger (contender, run_id, stage, kind, detail, at, pid) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (self.contender, run_id, stage, kind, detail, time.time(), os.getpid()),
        )

    def receive(self, key: str, run_id: str, detail: str) -> None:
        """Deliver ``run_id``'s effect to the receiver under ``key``: applied once per key."""
        self._conn().execute(
            "INSERT INTO receiver (key, contender, run_id, detail, at) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET deliveries = receiver.deliveries + 1",
            (key, self.contender, run_id, detail, time.time()),
        )

    def killed_before(self, run_id: str, stage: str) -> bool:
        row = (
            self._conn()
            .execute(
                "SELECT 1 FROM ledger WHERE run_id = %s AND stage = %s AND kind = %s LIMIT 1", (run_id, stage, KILL)
            )
            .fetchone()
        )
        return row is not None


def create_schema(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)


@dataclass(frozen=True)
class Row:
    run_id: str
    stage: str
    kind: str
    detail: str
    at: float


def rows(dsn: str, contender: str, *, since: float = 0.0) -> list[Row]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT run_id, stage, kind, detail, at FROM ledger WHERE contender = %s AND at >= %s ORDER BY at",
            (contender, since),
        ).fetchall()
    return [Row(*row) for row in found]


@dataclass(frozen=True)
class Received:
    """One key's row in the receiver: the run it was for, and how many times it was delivered."""

    key: str
    run_id: str
    deliveries: int


def received(dsn: str, contender: str) -> list[Received]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT key, run_id, deliveries FROM receiver WHERE contender = %s", (contender,)
        ).fetchall()
    return [Received(*row) for row in found]


@dataclass(frozen=True)
class KeyedCounts:
    """The receiver's view of ``runs`` runs: effects applied (distinct keys) and deliveries deduped."""

    runs: int
    applied: int
    effects_twice: int
    deduped: int


def keyed_counts(receipts: Iterable[Received], run_ids: list[str]) -> KeyedCounts:
    """With documented keys: a run's effect is applied twice only if two of its deliveries carried
    different keys (the engine's key was not stable); a delivery under a key already seen is deduped."""
    wanted = set(run_ids)
    keys: Counter[str] = Counter()
    deduped = 0
    for receipt in receipts:
        if receipt.run_id in wanted:
            keys[receipt.run_id] += 1
            deduped += receipt.deliveries - 1
    return KeyedCounts(
        runs=len(run_ids),
        applied=len(keys),
        effects_twice=sum(1 for n in keys.values() if n > 1),
        deduped=deduped,
    )


@dataclass(frozen=True)
class CrashCounts:
    """What the ledger shows of ``runs`` runs after the faults."""

    runs: int
    completed: int
    failed: int
    lost: int
    stages_twice: int
    effects_twice: int
    timeouts_never_fired: int
    replies_ignored: int
    late_replies: int
    kills: int
    # Repeats split: a kill planned "after" a stage's work (the work done, the engine not told)
    # must make every engine repeat that stage once ("planned"); any other repeat is collateral
    # (the kill while waiting, the server restart, work in flight beside a kill).
    stage_repeats_planned: int = 0
    stage_repeats_collateral: int = 0
    effects_twice_planned: int = 0
    effects_twice_collateral: int = 0


def crash_counts(
    ledger_rows: Iterable[Row],
    run_ids: list[str],
    no_reply: set[str],
    *,
    replies_sent: dict[str, float] | None = None,
    wait_seconds: float = float("inf"),
    failed: set[str] | None = None,
) -> CrashCounts:
    """Count completions, losses and duplicates of ``run_ids`` from the ledger alone.

    A run completed when its effect was applied at least once; one the engine ended as failed
    (``failed``, as it says: a stage's retries exhausted, a dead letter) is counted apart from
    one lost without a word. A stage ran twice when its work was done more than once in one run.
    A timeout never fired when a run given no reply reached its wait (its stage C was done), did
    not fail, and no effect says it timed out. A reply was ignored when a
    replied run ended by its timeout although the reply was sent (``replies_sent``: when) before
    that timeout was due; a reply sent after is late, the driver's doing, and counted apart, and
    one the driver never managed to hand over is neither (its failed hand-overs count it).
    Repeats (a stage's work done again, an effect applied again) are split into planned ones (the
    plan killed the runner after that stage's work, so every engine must repeat it once) and
    collateral ones (every other).
    """
    done: Counter[tuple[str, str]] = Counter()
    after_kills: Counter[tuple[str, str]] = Counter()
    waited_from: dict[str, float] = {}
    effects: dict[str, list[str]] = {}
    kills = 0
    for row in ledger_rows:
        if row.kind == KILL and row.detail == "after":
            after_kills[(row.run_id, row.stage)] += 1
        if row.kind == DONE:
            done[(row.run_id, row.stage)] += 1
            if row.stage == "C":
                waited_from[row.run_id] = min(row.at, waited_from.get(row.run_id, row.at))
        elif row.kind == EFFECT:
            effects.setdefault(row.run_id, []).append(row.detail)
        elif row.kind == KILL:
            kills += 1
    wanted = set(run_ids)
    completed = [run_id for run_id in run_ids if run_id in effects]
    ended_failed = {run_id for run_id in (failed or set()) & wanted if run_id not in effects}
    sent = replies_sent or {}

    def late(run_id: str) -> bool:
        due = waited_from.get(run_id, float("inf")) + wait_seconds
        return run_id in sent and sent[run_id] >= due - 1.0

    timed_out_replied = [run_id for run_id in completed if run_id not in no_reply and REPLIED not in effects[run_id]]
    repeats = {pair: n - 1 for pair, n in done.items() if n > 1 and pair[0] in wanted}
    planned = {pair: min(extra, after_kills[pair]) for pair, extra in repeats.items()}
    twice = [run_id for run_id in completed if len(effects[run_id]) > 1]
    twice_planned = [run_id for run_id in twice if after_kills[(run_id, "send")]]
    return CrashCounts(
        runs=len(run_ids),
        completed=len(completed),
        failed=len(ended_failed),
        lost=len(run_ids) - len(completed) - len(ended_failed),
        stages_twice=sum(1 for (run_id, _), n in done.items() if n > 1 and run_id in wanted),
        effects_twice=sum(1 for run_id in completed if len(effects[run_id]) > 1),
        timeouts_never_fired=sum(
            1
            for run_id in no_reply - ended_failed
            if run_id in waited_from and TIMED_OUT not in effects.get(run_id, [])
        ),
        # Only replies the driver handed over: one it never could is the driver's failed hand-over.
        replies_ignored=sum(1 for run_id in timed_out_replied if run_id in sent and not late(run_id)),
        late_replies=sum(1 for run_id in timed_out_replied if late(run_id)),
        kills=kills,
        stage_repeats_planned=sum(planned.values()),
        stage_repeats_collateral=sum(repeats.values()) - sum(planned.values()),
        effects_twice_planned=len(twice_planned),
        effects_twice_collateral=len(twice) - len(twice_planned),
    )
