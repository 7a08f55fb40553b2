"""W6: run the same agent graph on four contenders, measure each, then crash them all alike.

Per contender, with only its own runner up, in rounds (`peer_rounds`: a fresh runner each
round, the order rotated): latency (runs 10 at a time), sustained throughput at 50 concurrent
runs with each process's CPU, both with the reply sent before the run waits and again with it
sent once the run is seen waiting; resume latency, bytes of state per run. Then the
crash test, every runner capped at `STAGE_SLOTS` stage executions at once: 200 runs under one
seeded fault plan, runners SIGKILLed where it says and while the runs wait, the contender's
server (Temporal, or its PostgreSQL) restarted while they wait; the ledger (planned and collateral
repeats) and the keyed receiver say what came of them.

Longer than most modules because it is the one place each phase's procedure is written down,
the same for every contender.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from temporalio.client import Client

from bench.cpu import cpu_seconds, listening_pid
from bench.jobs import bounded
from bench.metrics import percentile
from bench.studies.peers import peer_ledger
from bench.studies.peers.contenders import (
    Contender,
    DbosContender,
    DsmoContender,
    LangGraphContender,
    TemporalContender,
)
from bench.studies.peers.fault_plan import FaultPlan
from bench.studies.peers.ledger_watch import LedgerWatch
from bench.studies.peers.peer_rounds import ROUND, TEMPORAL_LOCAL, combined, turn_order
from bench.studies.peers.peer_servers import Postgres
from bench.studies.peers.runner_config import STAGE_SLOTS, USER_CODE_BEGIN, USER_CODE_END, RunnerConfig
from bench.supervisor import Supervised
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.stack import DevStack, free_port_block, private_settings
from dsmo.runtime.storage import artifact_store
from dsmo.runtime.task_queue_pollers import live_pollers

NAMES = ("dsmo", "temporal", "langgraph", "dbos")
CHECKOUT = Path(__file__).resolve().parents[3]  # the folder holding `bench/` and `dsmo/`
# DSMO with its stages as regular Temporal activities (`localStages: never`), beside "dsmo" whose
# 5 s stages run as local activities (the default for short stages); the same worker and graph.
# `PEERS_DSMO_REGULAR=0` (or `PeerConfig(dsmo_regular=False)`) leaves it out.
DSMO_REGULAR = "dsmo-regular"
# "temporal-local" (`peer_rounds.TEMPORAL_LOCAL`) runs right after "temporal";
# `PEERS_TEMPORAL_LOCAL=0` (or `PeerConfig(temporal_local=False)`) leaves it out.
HERE = Path(__file__).resolve().parent
RUN_TIMEOUT_S = 120.0
BEFORE, WHILE_WAITING = "before", "while_waiting"  # the two reply shapes (see `one_run`)


def rounds_from_env(environ: Mapping[str, str]) -> int:
    """``PEERS_ROUNDS`` (3 when unset): how many rounds of the performance phases W6 runs."""
    text = environ.get("PEERS_ROUNDS", "3")
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"PEERS_ROUNDS: expected a whole number of rounds, at least 1; got {text!r}")
    return int(text)


@dataclass(frozen=True)
class PeerConfig:
    latency_runs: int = 100
    latency_concurrency: int = 10
    throughput_runs: int = 300
    throughput_concurrency: int = 50
    resume_samples: int = 10
    crash_runs: int = 200
    kill_share: float = 0.15
    no_reply_share: float = 0.2
    wait_seconds: float = 45.0
    # The crash test's wait: long enough that every reply arrives before it (the runs wait
    # through kills and a server restart first), so a reply ignored is the contender's doing.
    crash_wait_seconds: float = 120.0
    seed: int = 41
    dsmo_regular: bool = field(default_factory=lambda: os.environ.get("PEERS_DSMO_REGULAR", "1") != "0")
    temporal_local: bool = field(default_factory=lambda: os.environ.get("PEERS_TEMPORAL_LOCAL", "1") != "0")
    # Rounds of the performance phases (`peer_rounds`): each a fresh runner per contender, the
    # order rotated; the tables give the medians, the verdict each round's ratios.
    rounds: int = field(default_factory=lambda: rounds_from_env(os.environ))

    def names(self) -> tuple[str, ...]:
        """The contenders, "dsmo-regular" right after "dsmo" and "temporal-local" right after
        "temporal", unless left out."""
        names: list[str] = []
        for name in NAMES:
            names.append(name)
            if name == "dsmo" and self.dsmo_regular:
                names.append(DSMO_REGULAR)
            if name == "temporal" and self.temporal_local:
                names.append(TEMPORAL_LOCAL)
        return tuple(names)

    @classmethod
    def quick(cls) -> PeerConfig:
        return cls(
            latency_runs=30, throughput_runs=100, resume_samples=5, crash_runs=40, crash_wait_seconds=60.0, rounds=1
        )


@dataclass
class World:
    """The servers every contender shares: Temporal and the store (private), and two PostgreSQL."""

    settings: Settings
    stack: DevStack
    state: Postgres
    ledger: Postgres
    work_dir: Path

    @property
    def ledger_dsn(self) -> str:
        return self.ledger.dsn()


@contextlib.asynccontextmanager
async def world() -> AsyncIterator[World]:
    work_dir = Path(tempfile.mkdtemp(prefix="dsmo-peers-"))
    settings = private_settings(work_dir / "stack").with_changes(worker={"metrics_bind": ""})
    stack = DevStack(settings)
    servers: list[Postgres] = []
    try:
        await stack.up(timeout=90)
        for name in ("pg-state", "pg-ledger"):
            servers.append(await asyncio.to_thread(Postgres, work_dir / name))
        state, ledger = servers
        await asyncio.to_thread(peer_ledger.create_schema, ledger.dsn())
        yield World(settings, stack, state, ledger, work_dir)
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        stack.down()


async def make_contender(
    name: str, w: World, wait_seconds: float, *, plan_file: Path | None = None, capped: bool = False
) -> Contender:
    queue = f"peers-{name}-{uuid.uuid4().hex[:6]}"
    state_dsn = {"langgraph": "langgraph", "dbos": "dbos"}.get(name)
    config = RunnerConfig(
        contender=name,
        ledger_dsn=w.ledger_dsn,
        state_dsn=await asyncio.to_thread(w.state.create_database, state_dsn) if state_dsn else "",
        plan_file=plan_file,
        task_queue=queue,
        wait_seconds=wait_seconds,
        port=free_port_block(1) if name == "dbos" else 0,
        capped=capped,
    )
    store = artifact_store(w.settings)
    temporal_pid = w.stack.temporal.pid() or listening_pid(w.settings.temporal.port)
    if name in ("dsmo", DSMO_REGULAR):
        dsmo = await DsmoClient.connect(w.settings.with_changes(temporal={"task_queue": queue}))
        contender: Contender = DsmoContender(name, config, store, dsmo=dsmo, regular=name == DSMO_REGULAR)
        contender.runner_argv = ["-m", "dsmo.worker", "--load", "bench.studies.peers.dsmo_peer"]
    elif name in ("temporal", TEMPORAL_LOCAL):
        client = await Client.connect(w.settings.temporal.address, namespace=w.settings.temporal.namespace)
        contender = TemporalContender(name, config, store, client=client, local=name == TEMPORAL_LOCAL)
        contender.runner_argv = ["-m", "bench.studies.peers.temporal_peer"]
    elif name == "langgraph":
        contender = LangGraphContender(name, config, store)
        contender.runner_argv = ["-m", "bench.studies.peers.langgraph_peer"]
    else:
        http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{config.port}", timeout=30)
        contender = DbosContender(name, config, store, http=http)
        contender.runner_argv = ["-m", "bench.studies.peers.dbos_peer"]
    if runs_on_temporal(name) and temporal_pid:
        contender.server_pids["server"] = temporal_pid
    return contender


def runner_env(contender: Contender, w: World) -> dict[str, str]:
    env = {**w.settings.to_env(), **contender.config.to_env()}
    env["DSMO_TASK_QUEUE"] = contender.config.task_queue
    env["DSMO_METRICS_BIND"] = "off"
    # Every runner logs warnings only: the LangGraph and DBOS runners are set so, raw Temporal's
    # SDK logs nothing per run, and DSMO's worker writes a line per step at its default `info`.
    env["DSMO_LOG_LEVEL"] = "warning"
    # DSMO's worker takes as many activities, on as many threads, as every runner has slots.
    env["DSMO_MAX_CONCURRENT_ACTIVITIES"] = env["DSMO_PROCESSOR_THREADS"] = str(STAGE_SLOTS)
    env["PYTHONUNBUFFERED"] = "1"
    # The runners load their user code from this checkout (`bench.studies.peers.*`), wherever
    # the bench was started from.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(CHECKOUT), os.environ.get("PYTHONPATH"))))
    return env


async def started_runner(contender: Contender, w: World) -> Supervised:
    await contender.prepare()
    argv, env = [sys.executable, *contender.runner_argv], {**os.environ, **runner_env(contender, w)}
    runner = Supervised(argv, env, log_file=w.work_dir / f"{contender.name}.log")
    await runner.start()
    if runs_on_temporal(contender.name):
        await _until_polling(w, contender.config.task_queue, runner)
    return runner


def runs_on_temporal(name: str) -> bool:
    """Whether the contender's runner is a Temporal worker (DSMO's or raw Temporal's)."""
    return name in ("dsmo", DSMO_REGULAR, "temporal", TEMPORAL_LOCAL)


async def _until_polling(w: World, task_queue: str, runner: Supervised, timeout: float = 90.0) -> None:
    """Wait until the runner's worker polls its task queue.

    A DSMO reply is an update, which Temporal answers "no worker" after 5 s without one: on a
    slow start (imports on a loaded machine) the warm-up's first replies failed the round.
    """
    client = await Client.connect(w.settings.temporal.address, namespace=w.settings.temporal.namespace)
    deadline = time.monotonic() + timeout
    while not any(identity.startswith(f"{runner.pid}@") for identity in await live_pollers(client, task_queue)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{task_queue}: no worker polled within {timeout:.0f} s")
        await asyncio.sleep(0.2)


def cpu_sample(contender: Contender, runner: Supervised, w: World) -> dict[str, float]:
    sample = {"driver": cpu_seconds(os.getpid()), "runner": runner.cpu_seconds()}
    if contender.name in ("langgraph", "dbos"):
        sample["server"] = w.state.cpu_seconds()
    else:
        sample.update({role: cpu_seconds(pid) for role, pid in contender.server_pids.items()})
    s3_pid = w.stack.s3.pid() or listening_pid(w.settings.store.port)
    if s3_pid:
        sample["s3"] = cpu_seconds(s3_pid)
    sample["ledger"] = w.ledger.cpu_seconds()
    return sample


async def one_run(contender: Contender, watch: LedgerWatch, run_id: str, shape: str = BEFORE) -> float:
    """Start a run and reply; seconds from the start until its effect.

    ``BEFORE``: the reply is sent at once, before the run waits (the engine keeps it until its
    wait: DSMO's early-event inbox, a signal buffered by Temporal, a queued message or job).
    ``WHILE_WAITING``: the driver first sees the run wait, in the engine's own state, then replies.
    """
    began = time.time()
    await contender.start(run_id)
    if shape == WHILE_WAITING:
        await contender.until_waiting(run_id, RUN_TIMEOUT_S)
    await contender.reply(run_id)
    return await watch.effect(run_id, RUN_TIMEOUT_S) - began


async def wait_ready(contender: Contender, watch: LedgerWatch) -> None:
    """A first run through, which also warms every cache and connection."""
    await bounded(5, [lambda: one_run(contender, watch, f"{contender.name}-warm-{uuid.uuid4().hex[:8]}")] * 10)


async def measure(name: str, w: World, config: PeerConfig) -> dict[str, Any]:
    """Latency, throughput with CPU, resume latency and bytes of state of one contender."""
    contender = await make_contender(name, w, config.wait_seconds)
    runner = await started_runner(contender, w)
    token = uuid.uuid4().hex[:6]
    try:
        async with LedgerWatch(w.ledger_dsn, name) as watch:
            await wait_ready(contender, watch)

            def job(run_id: str, shape: str = BEFORE) -> Callable[[], Awaitable[float]]:
                return lambda: one_run(contender, watch, run_id, shape)

            latency_ids = [f"{name}-lat-{token}-{i}" for i in range(config.latency_runs)]
            latencies = await bounded(config.latency_concurrency, [job(r) for r in latency_ids])
            throughput_ids = [f"{name}-tp-{token}-{i}" for i in range(config.throughput_runs)]
            before, began = cpu_sample(contender, runner, w), time.perf_counter()
            await bounded(config.throughput_concurrency, [job(r) for r in throughput_ids])
            seconds = time.perf_counter() - began
            after = cpu_sample(contender, runner, w)
            cpu = {role: (after[role] - before[role]) * 1000 / len(throughput_ids) for role in before if role in after}
            # The same latency and throughput phases, each reply sent once the run is seen waiting.
            waited_ids = [f"{name}-latw-{token}-{i}" for i in range(config.latency_runs)]
            waited_latencies = await bounded(config.latency_concurrency, [job(r, WHILE_WAITING) for r in waited_ids])
            waited_tp_ids = [f"{name}-tpw-{token}-{i}" for i in range(config.throughput_runs)]
            began = time.perf_counter()
            await bounded(config.throughput_concurrency, [job(r, WHILE_WAITING) for r in waited_tp_ids])
            waited = {
                "p50": percentile(waited_latencies, 50),
                "p95": percentile(waited_latencies, 95),
                "throughput_per_min": len(waited_tp_ids) / (time.perf_counter() - began) * 60,
            }
            resumes = [
                await resume_once(contender, watch, f"{name}-res-{token}-{i}") for i in range(config.resume_samples)
            ]
            sample = latency_ids[:: max(1, len(latency_ids) // 10)][:10]
            engine = [await contender.engine_bytes(run_id) for run_id in sample]
            stored = [await asyncio.to_thread(store_bytes, contender, run_id) for run_id in sample]
        return {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "throughput_per_min": len(throughput_ids) / seconds * 60,
            "cpu_ms_per_run": cpu,
            "resume_p50": percentile(resumes, 50),
            "resume_p95": percentile(resumes, 95),
            "engine_bytes_per_run": statistics.median(engine),
            "store_bytes_per_run": statistics.median(stored),
            "user_code_lines": user_code_lines(name),
            "runner_restarts": runner.restarts,
            WHILE_WAITING: waited,
        }
    finally:
        await runner.stop()


async def resume_once(contender: Contender, watch: LedgerWatch, run_id: str) -> float:
    """The reply sent to a waiting run, until its next stage (the send) starts."""
    await contender.start(run_id)
    await watch.first(run_id, "C", peer_ledger.DONE)
    await asyncio.sleep(0.5)  # its wait has begun (idle: a step takes milliseconds)
    sent = time.time()
    await contender.reply(run_id)
    started = await watch.first(run_id, "send", peer_ledger.START)
    await watch.effect(run_id, RUN_TIMEOUT_S)
    return started - sent


def store_bytes(contender: Contender, run_id: str) -> int:
    total = 0
    s3 = contender.store.s3
    for prefix in contender.store_prefixes(run_id):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=contender.store.bucket, Prefix=prefix):
            total += sum(int(item["Size"]) for item in page.get("Contents", []))
    return total


def user_code_lines(name: str) -> int:
    """Non-blank, non-comment lines between the user-code markers of the contender's module."""
    module = {DSMO_REGULAR: "dsmo", TEMPORAL_LOCAL: "temporal"}.get(name, name)
    text = (HERE / f"{module}_peer.py").read_text()
    body = text.split(USER_CODE_BEGIN, 1)[1].split(USER_CODE_END, 1)[0]
    return sum(1 for line in body.splitlines() if line.strip() and not line.strip().startswith("#"))


async def crash_test(name: str, w: World, config: PeerConfig) -> dict[str, Any]:
    """``crash_runs`` runs under the seeded plan, kills while waiting, a server restart; the counts."""
    base = [f"r{i:04d}" for i in range(config.crash_runs)]
    plan = FaultPlan.draw(base, seed=config.seed, kill_share=config.kill_share, no_reply_share=config.no_reply_share)
    prefix = f"{name}-crash-{uuid.uuid4().hex[:6]}-"
    plan = plan.renamed(prefix)
    run_ids = [prefix + r for r in base]
    plan_file = w.work_dir / f"{name}-plan.json"
    plan.save(plan_file)
    contender = await make_contender(name, w, config.crash_wait_seconds, plan_file=plan_file, capped=True)
    runner = await started_runner(contender, w)
    began = time.time()
    replies_sent: dict[str, float] = {}
    failed: list[str] = []
    try:
        await bounded(20, [_handed_over(contender.start, run_id, failed) for run_id in run_ids])
        # Until every run that can has reached its wait (its stage C is done); a quarter of the
        # wait's timeout at most, so the replies below come well before it.
        await _until(
            lambda: _count_runs(w.ledger_dsn, run_ids, peer_ledger.DONE, "C") >= len(run_ids),
            config.crash_wait_seconds / 4,
        )
        await asyncio.sleep(2)
        runner.kill()  # while the runs wait
        await asyncio.sleep(3)
        await restart_server(name, w)
        await asyncio.sleep(2)
        replied = [run_id for run_id in run_ids if run_id not in plan.no_reply]
        deadline = time.monotonic() + config.crash_wait_seconds  # past it, a reply is late anyway
        replies = [_handed_over(contender.reply, run_id, failed, replies_sent, deadline) for run_id in replied]
        await bounded(20, replies)
        await _until(
            lambda: _count_runs(w.ledger_dsn, run_ids, peer_ledger.EFFECT) >= len(run_ids),
            config.crash_wait_seconds + 90,
        )
        rows = await asyncio.to_thread(peer_ledger.rows, w.ledger_dsn, name, since=began - 1)
        counts = peer_ledger.crash_counts(
            rows,
            run_ids,
            plan.no_reply,
            replies_sent=replies_sent,
            wait_seconds=config.crash_wait_seconds,
            failed=await contender.failed(run_ids),
        )
        receipts = await asyncio.to_thread(peer_ledger.received, w.ledger_dsn, name)
        return {
            **asdict(counts),
            "keyed": asdict(peer_ledger.keyed_counts(receipts, run_ids)),
            "planned_kills": len(plan.kills),
            "runner_restarts": runner.restarts,
            "hand_overs_failed": len(failed),
        }
    finally:
        await runner.stop()


def _handed_over(
    call: Callable[[str], Awaitable[None]],
    run_id: str,
    failed: list[str],
    sent: dict[str, float] | None = None,
    deadline: float | None = None,
) -> Callable[[], Awaitable[None]]:
    """Give ``run_id``'s start or reply to the contender, again while it is restarting or says it
    cannot take it yet (DSMO refuses an event while the run's workflow task keeps failing, and
    asks for it again); until ``deadline`` (monotonic), else 150 tries. A hand-over that never
    succeeds is recorded (the driver's failure, not the contender's loss)."""

    async def attempt() -> None:
        tries = 0
        while (time.monotonic() < deadline) if deadline is not None else tries < 150:
            tries += 1
            try:
                await call(run_id)
                if sent is not None:
                    sent[run_id] = time.time()
                return
            except Exception:  # noqa: BLE001 - any failure to hand it over: try again
                await asyncio.sleep(0.2)
        failed.append(run_id)

    return attempt


async def restart_server(name: str, w: World) -> None:
    if name in ("langgraph", "dbos"):
        await asyncio.to_thread(w.state.restart)
    else:
        await asyncio.to_thread(w.stack.temporal.stop, timeout=15)
        await w.stack.up(timeout=90)


async def _until(done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not await asyncio.to_thread(done):
        await asyncio.sleep(1)


def _count_runs(dsn: str, run_ids: list[str], kind: str, stage: str | None = None) -> int:
    """How many of ``run_ids`` have a ledger row of ``kind`` (of ``stage``, if given)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT run_id) FROM ledger WHERE run_id = ANY(%s) AND kind = %s"
            " AND (%s::text IS NULL OR stage = %s)",
            (run_ids, kind, stage, stage),
        ).fetchone()
    return int(row[0]) if row else 0


async def peers(config: PeerConfig, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Every phase for every contender (``names``, or the configuration's); the results by contender.

    ``contenders`` holds each contender's median over the rounds, ``rounds`` its figures round by
    round (in round order; a round that failed is left out and named under ``failures``).
    """
    names = names or config.names()
    results: dict[str, Any] = {"config": asdict(config), "contenders": {}, "crash": {}, "stage_slots": STAGE_SLOTS}
    measured: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    async with world() as w:
        for number in range(config.rounds):
            for name in turn_order(names, number):
                print(f"W6: round {number + 1} of {config.rounds}, measuring {name}", flush=True)
                figures = await _recorded(results, f"contenders.{name}.round{number + 1}", measure(name, w, config))
                if figures is not None:
                    measured[name].append({**figures, ROUND: number + 1})
        results["rounds"] = {name: rounds for name, rounds in measured.items() if rounds}
        results["contenders"] = {name: combined(rounds) for name, rounds in results["rounds"].items()}
        for name in names:
            print(f"W6: crash test, {name}", flush=True)
            crash = await _recorded(results, f"crash.{name}", crash_test(name, w, config))
            if crash is not None:
                results["crash"][name] = crash
    return results


async def _recorded(results: dict[str, Any], label: str, phase: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
    """Run one contender's phase; a failure is recorded under ``label`` and the rest of W6 still runs."""
    try:
        return await phase
    except Exception as err:  # noqa: BLE001 - report the rest of W6 anyway
        print(f"W6: {label} failed: {type(err).__name__}: {err}", flush=True)
        results.setdefault("failures", {})[label] = f"{type(err).__name__}: {err}"
        return None
