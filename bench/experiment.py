"""Table 1's experiment, paired: B3 on DSMO; B1, B1' and B2 on a real at-least-once queue.

Longer than most modules: the experiment's one loop over workloads and modes, with each mode's
runs, replays, real faults and records, reads best in one place.

Every mode runs the same inputs (`bench.paired.inputs_for`) and meets the same fault schedule,
which the agents' logged draws prove (`bench.pairing`).
Each input runs once, then is replayed ``replays`` times after its original ended: B3 through
DSMO's own replay (`dsmo replay`'s API: the run's recorded input and configuration snapshot,
re-executed as a new linked run), and once more from its record (every committed stage output
reused: the path DSMO's orchestration takes from the same outputs); the queue's modes by
re-injecting the original's recorded input into their queue (B2's replays take the original's
logged decisions). A replay meets its
original's faults. B2 also runs at the other shares of ``b2_sweep``. Paths, duplicates and
orphans of every mode come from the shared execution log by one rule (`bench.shared_rule`).

Faults are real in every mode: B3's stages run in a worker process of its own (`bench.b3_process`)
that a crash point SIGKILLs, as the queue modes' consumers are; every mode has ``executors``
stage executors; in W3 and W4 each mode's server (Temporal, or the queue's PostgreSQL) is
restarted mid-workload (`bench.restarts`). Each mode's result counts the kills and restarts it met.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import pairing
from bench.agents import SLOW_S
from bench.b2_sweep import sweep_mode
from bench.b3_process import b3_worker, riding_out
from bench.jobs import bounded
from bench.metrics import RunRecord, summarize
from bench.paired import RATES, Input, inputs_checksum, inputs_for, trajectory
from bench.queue_db import QueueDb, postgres
from bench.queue_modes import QueueModes
from bench.restarts import RESTARTED, Restart, ServerRestarts, due
from bench.scheduled import trail_end, trail_result
from bench.shared_rule import judge
from bench.workloads import definition
from dsmo.activities.audit_log import audit_key
from dsmo.client.client_errors import RunAlreadyExists
from dsmo.client.record_lines import reused_outputs
from dsmo.client.replay import ReplayPlanned, plan_replay, replay

if TYPE_CHECKING:
    from bench.supervisor import Supervised
    from dsmo.activities.artifacts import ArtifactStore
    from dsmo.client.dsmo_client import DsmoClient
    from dsmo.config.settings import Settings
    from dsmo.devstack.stack import DevStack

WORKLOADS = ("W1", "W2", "W3", "W4")
MODES = ("B3", "B1", "B1p", "B2")  # B1p: B1', the deduplicated choreography


@dataclass(frozen=True)
class Executed:
    """One run as the driver saw it: when it began and when its driver saw it end."""

    run_id: str
    item: Input
    replay: int
    began: float
    finished: float


class PaperExperiment:
    """Mixed into Bench: Table 1 for W1-W4, B3 against B1 and B2 on the queue."""

    dsmo: DsmoClient
    settings: Settings
    config: Any
    queue: str
    store: ArtifactStore
    devstack: DevStack | None  # the bench's own stack, whose Temporal it may restart (None: not ours)
    _history_bytes: Callable[[str], Awaitable[int]]  # Bench's: the run's history size
    # B3's mode being measured: original run -> whether its replay from the record matched it.
    _same_from_record: dict[str, bool]

    def _shape(self, workload: str) -> tuple[int, int]:
        """(inputs, concurrency): W4 is many runs at once, a new one starting as one ends."""
        if workload == "W4":
            return self.config.w4_inputs, self.config.w4_concurrency
        return self.config.inputs, self.config.concurrency

    @property
    def table1_queue(self) -> str:
        """The task queue of Table 1's B3 worker process (the floor's workers serve others)."""
        return self.queue + "-table1"

    async def table1(self, progress: Any = print, *, seed: int | None = None) -> dict[str, Any]:
        """Every workload in every mode; each mode's records and summary, and the pairing of
        the workload's modes from their agents' draws (`bench.pairing`; a broken pairing raises).

        ``seed`` (default: the configuration's) draws the inputs, the faults and B2's choices.
        """
        seed = self.config.seed if seed is None else seed
        results: dict[str, Any] = {}
        tag = uuid.uuid4().hex[:6]
        executors = self.config.executors
        with tempfile.TemporaryDirectory(prefix="dsmo-bench-queue-") as folder, postgres(Path(folder)) as dsn:
            db = QueueDb(dsn)
            queue = QueueModes(db, dsn, self.settings, self.store, seed, self.config.ambiguity, executors)
            queue.drain_quiet = self.config.drain_quiet
            servers = ServerRestarts(self.devstack, Path(folder))
            worker = b3_worker(self.settings, dsn=dsn, seed=seed, task_queue=self.table1_queue, slots=executors)
            async with worker as b3:
                for workload in WORKLOADS:
                    count, concurrency = self._shape(workload)
                    inputs = inputs_for(workload, count, seed)
                    results[workload] = {}
                    modes = (*MODES, *(sweep_mode(share) for share in self.config.b2_sweep))
                    for mode in modes:
                        progress(f"{workload} {mode}" + ("" if seed == self.config.seed else f" (seed {seed})"))
                        shape = (workload, inputs, concurrency, tag)
                        results[workload][mode] = await self._mode(db, queue, b3, servers, mode, *shape)
                    draws = {mode: await asyncio.to_thread(db.draws, mode.lower(), workload) for mode in modes}
                    results[workload]["pairing"] = pairing.compare(draws)
        return results

    async def _mode(
        self,
        db: QueueDb,
        queue: QueueModes,
        b3: Supervised,
        servers: ServerRestarts,
        mode: str,
        workload: str,
        inputs: list[Input],
        concurrency: int,
        tag: str,
    ) -> dict[str, Any]:
        replays = self.config.replays
        before = _deaths(mode, queue, b3)
        half = asyncio.Event()  # set once half the inputs have started: the restart strikes then
        restart = asyncio.create_task(self._restart_at(half, servers, mode)) if workload in RESTARTED else None
        started = time.perf_counter()
        if mode == "B3":
            self._same_from_record = {}
            jobs = [partial(self._b3_input, workload, item, replays, tag) for item in inputs]
            executed = await bounded(concurrency, _counted(jobs, workload, half))
            if RATES[workload].slow:  # a slow attempt Temporal gave up on may still be working: let it log
                await asyncio.sleep(SLOW_S + 1)
        else:
            async with queue.serving(mode.lower()):
                jobs = [
                    partial(self._queue_input, queue, mode.lower(), workload, item, replays, tag) for item in inputs
                ]
                executed = await bounded(concurrency, _counted(jobs, workload, half))
        wall = time.perf_counter() - started
        restarted = await restart if restart is not None else None
        runs = [run for group in executed for run in group]
        records = await bounded(8, [partial(self._record, db, mode, workload, run) for run in runs])
        kills, deaths = (now - then for now, then in zip(_deaths(mode, queue, b3), before, strict=True))
        summary = summarize(records, wall)
        if mode == "B3" and self._same_from_record:
            # DSMO's own replay from the record: the share that took the original's path and ending.
            matched = self._same_from_record.values()
            summary["sps_from_record"] = sum(matched) / len(matched)
            summary["replays_from_record"] = len(matched)
        return {
            "summary": summary,
            "latencies": [record.latency_s for record in records],
            "records": [asdict(record) for record in records],
            "checksums": {"inputs": inputs_checksum(inputs)},
            # Real faults met: executor processes SIGKILLed at crash points (and started again), and
            # the mode's server restarted mid-workload (W3 and W4).
            "faults": {
                "kills": kills,
                "deaths": deaths,  # every death of an executor process (each started again), kills included
                "server_restarts": restarted.count if restarted else 0,
                "restart": restarted.as_dict() if restarted else None,
            },
        }

    async def _restart_at(self, half: asyncio.Event, servers: ServerRestarts, mode: str) -> Restart:
        await half.wait()
        return await servers.restart(mode)

    # -- B3: DSMO, and its own replay ------------------------------------------------------------

    async def _b3_input(self, workload: str, item: Input, replays: int, tag: str) -> list[Executed]:
        run_id = f"b3-{tag}-{item.input_id}"
        data = {"route": item.route, "input": item.input_id, "workload": workload}
        began = time.time()

        async def start() -> None:
            with contextlib.suppress(RunAlreadyExists):  # an earlier try started it before Temporal went away
                await self.dsmo.start(definition(workload), data, run_id=run_id, task_queue=self.table1_queue)

        await riding_out(start)
        await riding_out(lambda: self.dsmo.result(run_id))
        runs = [Executed(run_id, item, 0, began, time.time())]
        planned = await riding_out(lambda: plan_replay(self.dsmo.core, self.store, run_id)) if replays else None
        for index in range(1, replays + 1):
            replay_id, began = f"{run_id}.replay-{index}", time.time()
            await riding_out(partial(self._b3_replay, run_id, replay_id, planned))
            runs.append(Executed(replay_id, item, index, began, time.time()))
        if planned is not None:
            self._same_from_record[run_id] = await riding_out(partial(self._b3_from_record, run_id, planned))
        return runs

    async def _b3_from_record(self, run_id: str, planned: ReplayPlanned) -> bool:
        """Replay the run from its record (every committed stage output reused, the rest re-run
        under the same draws): whether DSMO took the original's path to the original's ending."""
        recorded = planned.record_definition or planned.request.definition
        assert planned.request.replay is not None
        every_output = reused_outputs(recorded, planned.events, None)
        plan = planned.request.replay.model_copy(update={"reuse": every_output})
        from_record = replace(planned, request=planned.request.model_copy(update={"replay": plan}))
        replay_id = f"{run_id}.record"
        try:
            report = await replay(
                self.dsmo.core, self.store, run_id, new_id=replay_id, task_queue=self.table1_queue, planned=from_record
            )
        except RunAlreadyExists:  # an earlier try started it before Temporal went away
            await self.dsmo.result(replay_id)
            view = await self.dsmo.status(replay_id)
            return view.path == planned.original.path and view.status == planned.original.status
        return report.first_divergence is None and report.replay_status == report.original_status

    async def _b3_replay(self, run_id: str, replay_id: str, planned: ReplayPlanned | None) -> None:
        try:
            queue = self.table1_queue
            await replay(self.dsmo.core, self.store, run_id, new_id=replay_id, task_queue=queue, planned=planned)
        except RunAlreadyExists:  # an earlier try started it before Temporal went away
            await self.dsmo.result(replay_id)

    # -- B1 and B2: the queue, and the recorded input re-injected ------------------------------------

    async def _queue_input(
        self, queue: QueueModes, mode: str, workload: str, item: Input, replays: int, tag: str
    ) -> list[Executed]:
        run_id = f"{mode}-{tag}-{item.input_id}"
        data = {"route": item.route, "input": item.input_id, "workload": workload}
        stored = await asyncio.to_thread(self.store.put_json_once, f"artifacts/bench-{mode}/{run_id}/input.json", data)
        runs = []
        for index in range(replays + 1):
            this_id = run_id if index == 0 else f"{run_id}.replay-{index}"
            began = time.time()
            ended = await queue.run(mode, workload, this_id, item.input_id, index, stored.uri)
            runs.append(Executed(this_id, item, index, began, ended or time.time()))
        return runs

    # -- one rule for every mode -----------------------------------------------------------------

    async def _record(self, db: QueueDb, mode: str, workload: str, run: Executed) -> RunRecord:
        executions = await asyncio.to_thread(db.executions, run.run_id)
        valid = trajectory(workload, run.item.route)
        if mode == "B3":
            trail = await asyncio.to_thread(self._audit_trail, run.run_id)
            dlq, events = sum(e["type"] == "DEAD_LETTERED" for e in trail), len(trail)
            stored = await self._b3_bytes(run.run_id, definition(workload).workflow_version)
            verdict = judge(executions, valid, ended_at=trail_end(trail), result_uri=trail_result(trail))
        else:
            sent, message_bytes, dlq = await asyncio.to_thread(db.counts, run.run_id)
            events = sent
            artifacts = await asyncio.to_thread(self._prefix_bytes, f"artifacts/bench-{mode.lower()}/{run.run_id}/")
            stored = artifacts + message_bytes
            ended = await asyncio.to_thread(db.endings, [run.run_id])
            result = await asyncio.to_thread(db.result_uri, run.run_id)
            verdict = judge(executions, valid, ended_at=ended.get(run.run_id), result_uri=result)
        return RunRecord(
            run.run_id,
            run.item.input_id,
            run.replay > 0,
            path=verdict.path,
            # The paper's success: the graph's terminal stage completed and nothing was dead-lettered.
            success=verdict.terminal_completed and dlq == 0,
            latency_s=max(0.0, (verdict.end or run.finished) - run.began),
            duplicates=verdict.duplicates,
            orphans=verdict.orphans,
            dlq=dlq,
            events=events,
            bytes_stored=stored,
            orphans_lineage=verdict.orphans_lineage,
            unlinked=verdict.unlinked,
            late=verdict.late,
            attempts=verdict.attempts,
            valid_path=verdict.valid_path,
            retries=verdict.retries,
        )

    def _audit_trail(self, run_id: str) -> list[dict[str, Any]]:
        """The run's exported trail: a run without one cannot be judged, so its absence raises."""
        body = self.store.read_bytes(self.store.uri(audit_key(run_id)))
        return [json.loads(line) for line in body.decode().splitlines() if line]

    def _prefix_bytes(self, prefix: str) -> int:
        listed = self.store.s3.list_objects_v2(Bucket=self.store.bucket, Prefix=prefix).get("Contents", [])
        return sum(int(item["Size"]) for item in listed)

    async def _b3_bytes(self, run_id: str, version: str) -> int:
        history = await self._history_bytes(run_id)
        stored = await asyncio.to_thread(
            lambda: self._prefix_bytes(f"artifacts/{version}/{run_id}/") + self._prefix_bytes(audit_key(run_id))
        )
        return history + stored


def _counted(
    jobs: Sequence[Callable[[], Awaitable[list[Executed]]]], workload: str, half: asyncio.Event
) -> list[Callable[[], Awaitable[list[Executed]]]]:
    """``jobs``, each counting itself started; ``half`` is set when the workload's restart is `due`."""
    started = 0

    def counting(job: Callable[[], Awaitable[list[Executed]]]) -> Callable[[], Awaitable[list[Executed]]]:
        async def run() -> list[Executed]:
            nonlocal started
            started += 1
            if due(workload, started, len(jobs)):
                half.set()
            return await job()

        return run

    return [counting(job) for job in jobs]


def _deaths(mode: str, queue: QueueModes, b3: Supervised) -> tuple[int, int]:
    """(kills, deaths) so far of the processes that execute ``mode``'s stages."""
    return (b3.deaths.kills, b3.deaths.total) if mode == "B3" else (queue.kills, queue.restarts)
