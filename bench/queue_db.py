"""The baselines' broker and the shared execution log, in one real PostgreSQL (pgserver's wheel).

The queue is at-least-once, as the paper's Redis/BullMQ stack is: a consumer takes a message with
``FOR UPDATE SKIP LOCKED`` (competing consumers never take the same one at once), which makes it
invisible for the visibility timeout; an acknowledged message is deleted; one that is not
acknowledged in time (the consumer crashed, was slow, or its ack was lost) becomes visible again
and is delivered to whichever consumer asks next. Messages become visible after a small random
delay, so competing consumers also see them out of order. There is no deduplication.

The execution log (``executions``) is written by every agent of every mode, B3's included: the
shared rule (`bench.shared_rule`) reads it. The server is restarted mid-workload in W3 and W4
(`bench.restarts`): every connection then breaks, the log and the bench's own calls wait for it
to come back (`reconnecting`), and a consumer drops the message in hand (it is redelivered).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.reconnecting import reconnecting
from bench.shared_rule import StageExecution

VISIBILITY_S = 1.5  # as B3's stage timeout
JITTER_S = 0.02  # delivery delay drawn per message: the reordering of a broker with competing consumers
RETRY_BASE_S = 0.2  # a transient failure makes the message visible again after 0.2 s, 0.4 s, ...

FIELDS = [field.name for field in dataclasses.fields(StageExecution)]
EXECUTION_COLUMNS = ", ".join(FIELDS)

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    id bigserial PRIMARY KEY, mode text NOT NULL, run_id text NOT NULL, input_id text NOT NULL,
    replay int NOT NULL, workload text NOT NULL, stage text NOT NULL, body jsonb NOT NULL,
    visible_at timestamptz NOT NULL DEFAULT now(), deliveries int NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS queue_ready ON queue (mode, visible_at);
CREATE TABLE IF NOT EXISTS sent (mode text, run_id text, stage text, bytes int, at double precision);
CREATE INDEX IF NOT EXISTS sent_run ON sent (run_id);
CREATE TABLE IF NOT EXISTS dead_letters (mode text, run_id text, stage text, reason text, at double precision);
CREATE INDEX IF NOT EXISTS dead_run ON dead_letters (run_id);
CREATE TABLE IF NOT EXISTS ends (mode text, run_id text, stage text, at double precision, uri text);
CREATE INDEX IF NOT EXISTS ends_run ON ends (run_id);
CREATE TABLE IF NOT EXISTS executions (
    mode text, run_id text, stage text, attempt int, consumer text, outcome text,
    started double precision, finished double precision,
    exec_id text, parent text, fault text, fault_key text, read_uri text, wrote_uri text);
CREATE INDEX IF NOT EXISTS executions_run ON executions (run_id);
CREATE TABLE IF NOT EXISTS enqueued (mode text, run_id text, stage text, PRIMARY KEY (mode, run_id, stage));
CREATE TABLE IF NOT EXISTS decisions (
    mode text, run_id text, stage text, hop int, choice text, source text, at double precision,
    PRIMARY KEY (mode, run_id, stage, hop));
"""


@contextlib.contextmanager
def postgres(data_dir: Path) -> Iterator[str]:
    """A PostgreSQL server from pgserver's wheel in ``data_dir``, with the schema; yields its DSN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR on CI machines
        from pgserver.postgres_server import get_server

    server = get_server(data_dir, cleanup_mode="stop")
    try:
        dsn = dsn_for(data_dir)
        create_schema(dsn)
        yield dsn
    finally:
        server.cleanup()


def dsn_for(data_dir: Path) -> str:
    """The connection string of pgserver's database in ``data_dir`` (a Unix socket there)."""
    return f"host={data_dir} user=postgres dbname=postgres"


def connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def create_schema(dsn: str) -> None:
    with connect(dsn) as conn:
        conn.execute(SCHEMA)


@dataclass(frozen=True)
class Message:
    """One delivery of a queued stage."""

    id: int
    mode: str
    run_id: str
    input_id: str
    replay: int
    workload: str
    stage: str
    body: dict[str, Any]
    deliveries: int


class QueueDb:
    """The queue, the dead letters and the execution log over one connection per thread."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._local = threading.local()

    @property
    def conn(self) -> psycopg.Connection[Any]:
        found: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if found is None or found.closed or found.broken:
            found = connect(self.dsn)
            self._local.conn = found
        return found

    def reset(self) -> None:
        """Drop this thread's connection (the server went away): the next call opens another."""
        found: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if found is not None:
            with contextlib.suppress(psycopg.Error):
                found.close()

    @reconnecting
    def enqueue(
        self, mode: str, run_id: str, input_id: str, replay: int, workload: str, stage: str, body: dict[str, Any]
    ) -> None:
        text = json.dumps(body)
        delay = random.random() * JITTER_S
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO queue (mode, run_id, input_id, replay, workload, stage, body, visible_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s))",
                (mode, run_id, input_id, replay, workload, stage, text, delay),
            )
            self.conn.execute(
                "INSERT INTO sent VALUES (%s, %s, %s, %s, %s)", (mode, run_id, stage, len(text), time.time())
            )

    def enqueue_and_ack(self, message: Message, stage: str | None, body: dict[str, Any], end_uri: str = "") -> None:
        """B1': enqueue ``stage`` once per (run, stage) and delete ``message``, in one transaction
        (``stage`` None: the chain ends here, with ``end_uri``). A redelivery that gets here
        again enqueues nothing: the first enqueue of the stage stands."""
        text = json.dumps(body)
        with self.conn.transaction():
            if stage is None:
                self.conn.execute(
                    "INSERT INTO ends VALUES (%s, %s, %s, %s, %s)",
                    (message.mode, message.run_id, message.stage, time.time(), end_uri),
                )
            else:
                fresh = self.conn.execute(
                    "INSERT INTO enqueued VALUES (%s, %s, %s) ON CONFLICT (mode, run_id, stage) DO NOTHING RETURNING 1",
                    (message.mode, message.run_id, stage),
                ).fetchone()
                if fresh is not None:
                    self.conn.execute(
                        "INSERT INTO queue (mode, run_id, input_id, replay, workload, stage, body, visible_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s))",
                        (*_route(message), stage, text, random.random() * JITTER_S),
                    )
                    self.conn.execute(
                        "INSERT INTO sent VALUES (%s, %s, %s, %s, %s)",
                        (message.mode, message.run_id, stage, len(text), time.time()),
                    )
            self.conn.execute("DELETE FROM queue WHERE id = %s", (message.id,))

    def decision(self, mode: str, run_id: str, stage: str, hop: int) -> str | None:
        """B2: the choice logged at (``stage``, ``hop``) of ``run_id`` ("" stops; None: none logged)."""
        row = self.conn.execute(
            "SELECT choice FROM decisions WHERE mode = %s AND run_id = %s AND stage = %s AND hop = %s",
            (mode, run_id, stage, hop),
        ).fetchone()
        return None if row is None else str(row[0])

    def record_decision(self, mode: str, run_id: str, stage: str, hop: int, choice: str, source: str) -> None:
        """B2: log a choice (the first at a (run, stage, hop) stands: a redelivery decides nothing new)."""
        self.conn.execute(
            "INSERT INTO decisions VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (mode, run_id, stage, hop, choice, source, time.time()),
        )

    def receive(self, mode: str) -> Message | None:
        """Take the next visible message of ``mode``, hiding it for the visibility timeout."""
        row = self.conn.execute(
            "UPDATE queue SET visible_at = now() + make_interval(secs => %s), deliveries = deliveries + 1 "
            "WHERE id = (SELECT id FROM queue WHERE mode = %s AND visible_at <= now() "
            "ORDER BY visible_at FOR UPDATE SKIP LOCKED LIMIT 1) "
            "RETURNING id, mode, run_id, input_id, replay, workload, stage, body, deliveries",
            (VISIBILITY_S, mode),
        ).fetchone()
        return None if row is None else Message(*row)

    def ack(self, message: Message) -> None:
        self.conn.execute("DELETE FROM queue WHERE id = %s", (message.id,))

    def retry_later(self, message: Message) -> None:
        """A transient failure: visible again after the retry policy's back-off."""
        delay = RETRY_BASE_S * 2 ** (message.deliveries - 1)
        self.conn.execute(
            "UPDATE queue SET visible_at = now() + make_interval(secs => %s) WHERE id = %s", (delay, message.id)
        )

    def dead_letter(self, message: Message, reason: str) -> None:
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO dead_letters VALUES (%s, %s, %s, %s, %s)",
                (message.mode, message.run_id, message.stage, reason, time.time()),
            )
            self.conn.execute("DELETE FROM queue WHERE id = %s", (message.id,))

    @reconnecting
    def log(self, mode: str, execution: StageExecution) -> None:
        """One stage execution, by the agent that ran it."""
        self.conn.execute(
            f"INSERT INTO executions (mode, {EXECUTION_COLUMNS}) VALUES (%s, {', '.join(['%s'] * len(FIELDS))})",
            (mode, *(getattr(execution, name) for name in FIELDS)),
        )

    # -- what the bench reads ----------------------------------------------------------------

    @reconnecting
    def executions(self, run_id: str) -> list[StageExecution]:
        rows = self.conn.execute(f"SELECT {EXECUTION_COLUMNS} FROM executions WHERE run_id = %s", (run_id,)).fetchall()
        return [StageExecution(*row) for row in rows]

    @reconnecting
    def draws(self, mode: str, workload: str) -> list[tuple[str, str, str]]:
        """Every (run id, fault key, fault drawn) the agents of ``mode`` logged for ``workload``'s inputs."""
        rows = self.conn.execute(
            "SELECT run_id, fault_key, fault FROM executions WHERE mode = %s AND fault_key LIKE %s",
            (mode, f"{workload.lower()}-%"),
        ).fetchall()
        return [(str(run_id), str(key), str(fault)) for run_id, key, fault in rows]

    def finish(self, mode: str, run_id: str, stage: str, uri: str = "") -> None:
        """An agent enqueued nothing after ``stage``: a chain of the run ended there, with ``uri``."""
        self.conn.execute("INSERT INTO ends VALUES (%s, %s, %s, %s, %s)", (mode, run_id, stage, time.time(), uri))

    @reconnecting
    def result_uri(self, run_id: str) -> str | None:
        """The output the run's first chain ended with (None: no chain ended)."""
        row = self.conn.execute("SELECT uri FROM ends WHERE run_id = %s ORDER BY at LIMIT 1", (run_id,)).fetchone()
        return str(row[0]) if row and row[0] else None

    @reconnecting
    def endings(self, run_ids: list[str]) -> dict[str, float]:
        """When each run's first chain ended or was dead-lettered, for the runs that have."""
        rows = self.conn.execute(
            "SELECT run_id, min(at) FROM (SELECT run_id, at FROM ends WHERE run_id = ANY(%s) "
            "UNION ALL SELECT run_id, at FROM dead_letters WHERE run_id = ANY(%s)) AS over GROUP BY run_id",
            (run_ids, run_ids),
        ).fetchall()
        return {str(run_id): float(at) for run_id, at in rows}

    @reconnecting
    def counts(self, run_id: str) -> tuple[int, int, int]:
        """(messages sent, their bytes, dead letters) of one run."""
        sent = self.conn.execute(
            "SELECT count(*), coalesce(sum(bytes), 0) FROM sent WHERE run_id = %s", (run_id,)
        ).fetchone()
        dead = self.conn.execute("SELECT count(*) FROM dead_letters WHERE run_id = %s", (run_id,)).fetchone()
        return int(sent[0]) if sent else 0, int(sent[1]) if sent else 0, int(dead[0]) if dead else 0

    @reconnecting
    def pending(self, mode: str) -> int:
        row = self.conn.execute("SELECT count(*) FROM queue WHERE mode = %s", (mode,)).fetchone()
        return int(row[0]) if row else 0


def _route(message: Message) -> tuple[str, str, str, int, str]:
    """The columns a stage enqueued after ``message`` shares with it: mode, run, input, replay, workload."""
    return message.mode, message.run_id, message.input_id, message.replay, message.workload
