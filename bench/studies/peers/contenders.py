"""The driver's side of each contender: its runner command, how a run starts, how a reply arrives,
how the driver sees that a run waits, and how many bytes of engine state a run leaves.

Every contender's runs begin the same way, timed from the same moment: the driver writes the
input document to the store (DSMO's client does it inside `start`), then asks the contender.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from bench.studies.peers import langgraph_peer
from bench.studies.peers.peer_state import StateReader, ids, row_bytes
from bench.studies.peers.runner_config import RunnerConfig
from dsmo.workflows.common.status import RunStatus

if TYPE_CHECKING:
    from dsmo.activities.artifacts import ArtifactStore
    from dsmo.client.dsmo_client import DsmoClient

RETRY_S = 0.2  # a start or reply the runner could not take (it was down) is sent again this often
HAND_OVER_S = 60.0  # ... for at most this long
WAIT_POLL_S = 0.05  # how often the driver asks an engine whether a run waits (the reply-while-waiting shape)


def input_document(run_id: str) -> dict[str, Any]:
    # ``lastResponse`` starts empty, so DSMO's transition after a timed-out wait can read it.
    return {"input": run_id, "text": "Dear applicant, " * 8, "lastResponse": None}


@dataclass
class Contender:
    """What every contender shares: its name, runner, and the store its artifacts land in."""

    name: str
    config: RunnerConfig
    store: ArtifactStore
    runner_argv: list[str] = field(default_factory=list)
    # The processes whose CPU the contender costs besides its runner: role -> pid.
    server_pids: dict[str, int] = field(default_factory=dict)

    async def prepare(self) -> None:
        """What must exist before the first start (the job table a LangGraph deployment adds)."""

    async def start(self, run_id: str) -> None:
        raise NotImplementedError

    async def reply(self, run_id: str) -> None:
        raise NotImplementedError

    async def waiting(self, run_id: str) -> bool:
        """Whether the engine's own state says the run waits for its reply (its timeout is set)."""
        raise NotImplementedError

    async def until_waiting(self, run_id: str, timeout: float) -> None:
        """Return once the run waits, polling `waiting` every `WAIT_POLL_S`."""
        deadline = time.monotonic() + timeout
        while not await self.waiting(run_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{run_id}: not waiting within {timeout:.0f} s")
            await asyncio.sleep(WAIT_POLL_S)

    async def engine_bytes(self, run_id: str) -> int:
        """Bytes the engine keeps for one ended run (history, checkpoints or system rows)."""
        raise NotImplementedError

    async def failed(self, run_ids: list[str]) -> set[str]:
        """The runs the engine itself ended as failed (it says so), as opposed to lost."""
        return set()

    def store_prefixes(self, run_id: str) -> list[str]:
        return [f"artifacts/peers/{self.name}/{run_id}/"]

    async def _put_input(self, run_id: str) -> str:
        key = f"artifacts/peers/{self.name}/{run_id}/input.json"
        stored = await asyncio.to_thread(self.store.put_json_once, key, input_document(run_id))
        return str(stored.uri)


@dataclass
class DsmoContender(Contender):
    dsmo: DsmoClient | None = None
    workflow_version: str = ""
    regular: bool = False  # "dsmo-regular": every stage a regular activity (`localStages: never`)

    async def start(self, run_id: str) -> None:
        assert self.dsmo is not None
        # Imported here: the module registers W6's agents, which only its worker serves.
        from bench.studies.peers import dsmo_peer

        # Parsed once, as a deployment would: W6 measures the engine, not a YAML parser.
        definition = dsmo_peer.definition(self.config.wait_seconds, regular=self.regular)
        self.workflow_version = definition.workflow_version
        await self.dsmo.start(definition, input_document(run_id), run_id=run_id, task_queue=self.config.task_queue)

    async def reply(self, run_id: str) -> None:
        assert self.dsmo is not None
        await self.dsmo.respond(run_id, "ok", event_id=f"{run_id}-reply")

    async def until_waiting(self, run_id: str, timeout: float) -> None:
        """The run's status is ``waiting`` (DSMO's status query, polled by its client)."""
        assert self.dsmo is not None
        await self.dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=timeout, interval=WAIT_POLL_S)

    async def engine_bytes(self, run_id: str) -> int:
        assert self.dsmo is not None
        return await history_bytes(self.dsmo.temporal, run_id)

    async def failed(self, run_ids: list[str]) -> set[str]:
        assert self.dsmo is not None
        query = f"TaskQueue='{self.config.task_queue}' AND AgentExecutionStatus IN ('failed', 'timeout')"
        return await listed(self.dsmo.temporal, query)

    def store_prefixes(self, run_id: str) -> list[str]:
        return [f"artifacts/{self.workflow_version}/{run_id}/", f"audit/{run_id}.jsonl", f"audit/{run_id}/"]


@dataclass
class TemporalContender(Contender):
    client: Client | None = None
    local: bool = False  # "temporal-local": the stages and the send as local activities

    async def start(self, run_id: str) -> None:
        assert self.client is not None
        uri = await self._put_input(run_id)
        await self.client.start_workflow(
            "PeerRun",
            args=[run_id, uri, self.config.wait_seconds, self.local],
            id=run_id,
            task_queue=self.config.task_queue,
        )

    async def reply(self, run_id: str) -> None:
        assert self.client is not None
        await self.client.get_workflow_handle(run_id).signal("answer", "ok")

    async def waiting(self, run_id: str) -> bool:
        """The workflow's ``waiting`` query (true once it is in ``wait_condition``)."""
        assert self.client is not None
        try:
            return bool(await self.client.get_workflow_handle(run_id).query("waiting"))
        except (RPCError, WorkflowQueryFailedError):  # its first workflow task not done yet: ask again
            return False

    async def engine_bytes(self, run_id: str) -> int:
        assert self.client is not None
        return await history_bytes(self.client, run_id)

    async def failed(self, run_ids: list[str]) -> set[str]:
        assert self.client is not None
        query = f"TaskQueue='{self.config.task_queue}' AND ExecutionStatus IN ('Failed', 'TimedOut')"
        return await listed(self.client, query)


async def listed(client: Client, query: str) -> set[str]:
    return {execution.id async for execution in client.list_workflows(query)}


async def history_bytes(client: Client, run_id: str) -> int:
    history = await client.get_workflow_handle(run_id).fetch_history()
    return sum(event.ByteSize() for event in history.events)


@dataclass
class LangGraphContender(Contender):
    """Starts and replies are rows in the job table, added over one kept connection (as an API
    server in front of the runners would)."""

    _conn: psycopg.Connection[Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _state: StateReader = field(default_factory=lambda: StateReader(""))

    def __post_init__(self) -> None:
        self._state = StateReader(self.config.state_dsn)

    async def prepare(self) -> None:
        await asyncio.to_thread(self._create_jobs)

    def _create_jobs(self) -> None:
        with psycopg.connect(self.config.state_dsn, autocommit=True) as conn:
            conn.execute(langgraph_peer.JOBS)

    async def start(self, run_id: str) -> None:
        uri = await self._put_input(run_id)
        await asyncio.to_thread(self._enqueue, run_id, "start", {"uri": uri})

    async def reply(self, run_id: str) -> None:
        await asyncio.to_thread(self._enqueue, run_id, "reply", {})

    async def waiting(self, run_id: str) -> bool:
        """The thread's checkpoint holds its ``interrupt`` (the write LangGraph saves when a node interrupts)."""
        query = "SELECT 1 FROM checkpoint_writes WHERE thread_id = %s AND channel = '__interrupt__' LIMIT 1"
        return await self._state.exists(query, run_id)

    def _enqueue(self, run_id: str, kind: str, payload: dict[str, Any]) -> None:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.config.state_dsn, autocommit=True)
            try:
                langgraph_peer.enqueue(self._conn, run_id, kind, payload)
            except psycopg.OperationalError:  # the database restarted: the next call reconnects
                self._conn.close()
                raise

    async def failed(self, run_ids: list[str]) -> set[str]:
        return await asyncio.to_thread(
            ids, self.config.state_dsn, "SELECT DISTINCT thread_id FROM lg_jobs WHERE failed", run_ids
        )

    async def engine_bytes(self, run_id: str) -> int:
        tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "lg_jobs")
        return await asyncio.to_thread(row_bytes, self.config.state_dsn, tables, "thread_id", run_id)


@dataclass
class DbosContender(Contender):
    http: httpx.AsyncClient | None = None
    _state: StateReader = field(default_factory=lambda: StateReader(""))

    def __post_init__(self) -> None:
        self._state = StateReader(self.config.state_dsn)

    async def start(self, run_id: str) -> None:
        uri = await self._put_input(run_id)
        await self._post(f"/runs/{run_id}", {"input_uri": uri})

    async def reply(self, run_id: str) -> None:
        await self._post(f"/runs/{run_id}/reply", {})

    async def waiting(self, run_id: str) -> bool:
        """``recv`` has recorded its durable timeout (the ``DBOS.sleep`` operation DBOS writes as it waits)."""
        query = "SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid = %s AND function_name = 'DBOS.sleep' LIMIT 1"
        return await self._state.exists(query, run_id)

    async def _post(self, path: str, params: dict[str, str]) -> None:
        assert self.http is not None
        deadline = time.monotonic() + HAND_OVER_S
        while True:  # the runner may be down for a second after a kill: send again
            try:
                response = await self.http.post(path, params=params)
                if response.status_code < 500:
                    response.raise_for_status()
                    return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path}: the DBOS app did not take it within {HAND_OVER_S:.0f} s")
            await asyncio.sleep(RETRY_S)

    async def failed(self, run_ids: list[str]) -> set[str]:
        query = "SELECT workflow_uuid FROM dbos.workflow_status WHERE status NOT IN ('SUCCESS', 'PENDING', 'ENQUEUED')"
        return await asyncio.to_thread(ids, self.config.state_dsn, query, run_ids)

    async def engine_bytes(self, run_id: str) -> int:
        tables = ("dbos.workflow_status", "dbos.operation_outputs", "dbos.workflow_input", "dbos.workflow_output")
        rows = await asyncio.to_thread(row_bytes, self.config.state_dsn, tables, "workflow_uuid", run_id)
        notes = await asyncio.to_thread(
            row_bytes, self.config.state_dsn, ("dbos.notifications",), "destination_uuid", run_id
        )
        return rows + notes
