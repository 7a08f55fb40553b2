"""Shared fixtures: one embedded stack per session, one worker per test on its own queue."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.api.testservice.v1 import SleepRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

import dsmo_examples  # noqa: F401 - registers the example agents (and the order saga's actions)
from dsmo.activities.actions import ActionRegistry
from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.activities.processors import ProcessorRegistry, default_registry
from dsmo.client.definition_files import parse_definition_text
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.devstack.dev_keys import ensure_dev_subject_keys
from dsmo.runtime.provisioning import ensure_search_attributes_on
from dsmo.runtime.storage import artifact_store
from dsmo.worker import build_worker
from dsmo.workflows.definition.model import AgentDefinition
from dsmo_examples.orders.db import OrderDatabase
from dsmo_examples.orders.order_steps import order_actions
from tests.fresh_venv import FreshVenv, build_wheel, create
from tests.stack import reusable, start_private

REPO = Path(__file__).resolve().parent.parent

# The suite runs workflows inside Temporal's sandbox, so a clock read, an import of an I/O module
# or another non-deterministic call added to workflows/ fails here even where the static checks
# miss it. Production workers run without it (see worker.workflow_runner_for); the bench smoke
# test runs that configuration.
os.environ.setdefault("DSMO_WORKFLOW_SANDBOX", "on")


def pytest_configure(config: pytest.Config) -> None:
    """With parallel workers (`-n N`), the controller starts the one stack they share, before they start."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        config.stash[_SHARED_STACK] = _start_shared_stack()


def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(_SHARED_STACK, None)
    if shared is not None:
        stack, state_dir = shared
        stack.down()
        shutil.rmtree(state_dir, ignore_errors=True)


_SHARED_STACK = pytest.StashKey[tuple[Any, Path] | None]()


# Names the file where the controller wrote the shared stack's settings. Only this one variable
# is set: the settings themselves stay out of the environment, as with a sequential run's private
# stack (a test that builds its own stack, or reads AWS_* variables, must not see them).
SHARED_STACK_FILE = "DSMO_TEST_SHARED_STACK"


def _start_shared_stack() -> tuple[Any, Path] | None:
    """A private stack every worker finds through `SHARED_STACK_FILE`; None when a running stack
    is to be reused as it is."""
    if os.environ.get("DSMO_TEST_PRIVATE_STACK") != "1" and asyncio.run(reusable(Settings.from_env())):
        return None
    state_dir = Path(tempfile.mkdtemp(prefix="dsmo-test-stack-"))
    settings, stack = asyncio.run(start_private(state_dir))
    settings_file = state_dir / "settings.json"
    settings_file.write_text(json.dumps(settings.to_env()))
    os.environ[SHARED_STACK_FILE] = str(settings_file)
    return stack, state_dir


@pytest_asyncio.fixture(scope="session")
async def stack_settings(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Settings]:
    if shared_file := os.environ.get(SHARED_STACK_FILE):  # a parallel worker: the controller's stack
        yield Settings.from_env({**os.environ, **json.loads(Path(shared_file).read_text())})
        return
    configured = Settings.from_env()
    if os.environ.get("DSMO_TEST_PRIVATE_STACK") != "1" and await reusable(configured):
        ensure_dev_subject_keys(configured)  # a stack started by an older `dsmo dev up` has none
        yield configured
        return
    settings, stack = await start_private(tmp_path_factory.mktemp("stack"))
    try:
        yield settings
    finally:
        stack.down()


@pytest_asyncio.fixture(scope="session")
async def dsmo(stack_settings: Settings) -> DsmoClient:
    return await DsmoClient.connect(stack_settings)


@pytest.fixture(scope="session")
def store(stack_settings: Settings) -> ArtifactStore:
    # The worker's store (obstore for stage I/O) without its cache: assertions read the bucket.
    return artifact_store(stack_settings)


@dataclass
class Harness:
    """A worker on a fresh task queue and the means to drive runs through it."""

    dsmo: DsmoClient
    store: ArtifactStore
    task_queue: str
    outbox: Path
    settings: Settings

    started: list[str] = field(default_factory=list)

    async def start(self, definition: AgentDefinition, variables: dict[str, Any] | None = None, **kwargs: Any) -> str:
        run_id = (await self.dsmo.start(definition, variables or {}, task_queue=self.task_queue, **kwargs)).run_id
        self.started.append(run_id)
        return run_id

    async def replay_all(self) -> None:
        """Replay every run this test started on the current code: nondeterminism fails the test."""
        from tests.unit.test_golden_histories import replayer

        for run_id in self.started:
            handle = self.dsmo.temporal.get_workflow_handle(run_id)
            try:
                if (await handle.describe()).close_time is None:
                    continue  # still running (e.g. a fire-and-forget child): nothing final to check
                history = await handle.fetch_history()
            except Exception:  # noqa: BLE001 - a run on another server (time-skipping) is checked there
                continue
            result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
            assert result.replay_failure is None, f"{run_id} does not replay: {result.replay_failure}"

    def messages(self, run_id: str) -> list[dict[str, Any]]:
        folder = self.outbox / run_id
        if not folder.exists():
            return []
        records = [json.loads(path.read_text()) for path in folder.glob("*.json")]
        return sorted(records, key=lambda record: record["sentAt"])

    async def patch_markers(self, run_id: str) -> list[str]:
        """The `workflow.patched` ids the run's latest history records (local activities' markers aside)."""
        history = await self.dsmo.temporal.get_workflow_handle(run_id).fetch_history()
        return [
            json.loads(event.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and event.marker_recorded_event_attributes.marker_name == "core_patch"
        ]

    def cli_env(self) -> dict[str, str]:
        return {**os.environ, **self.settings.with_changes(temporal={"task_queue": self.task_queue}).to_env()}


@pytest.fixture
def registry() -> ProcessorRegistry:
    return default_registry


def registry_with(processors: dict[str, Any], version: str = "1.0.0") -> ProcessorRegistry:
    """The built-in processors and ``processors`` (name -> function), in a registry of a test's own:
    the process's default registry, which the agent catalog's tests read, is left as it is."""
    merged = ProcessorRegistry()
    for name in default_registry.names():
        processor = default_registry.get(name)
        merged.register(processor.name, processor.version)(processor.fn)
    for name, fn in processors.items():
        merged.register(name, version)(fn)
    return merged


@pytest.fixture
def order_db(tmp_path: Path) -> OrderDatabase:
    db = OrderDatabase(f"sqlite:///{tmp_path / 'orders.db'}")
    db.set_stock("lamp", 10)
    return db


@pytest.fixture
def actions(order_db: OrderDatabase) -> ActionRegistry:
    return order_actions(order_db)


@pytest_asyncio.fixture
async def harness(
    dsmo: DsmoClient,
    store: ArtifactStore,
    registry: ProcessorRegistry,
    actions: ActionRegistry,
    tmp_path: Path,
    stack_settings: Settings,
) -> AsyncIterator[Harness]:
    task_queue = f"test-{uuid.uuid4().hex[:10]}"
    outbox = tmp_path / "outbox"
    worker = build_worker(
        dsmo.temporal,
        task_queue=task_queue,
        store=store,
        channel=FileChannel(outbox),
        registry=registry,
        actions=actions,
        # DSMO_TEST_MAX_CACHED=0 makes every workflow task replay the whole history.
        max_cached_workflows=int(os.environ["DSMO_TEST_MAX_CACHED"]) if "DSMO_TEST_MAX_CACHED" in os.environ else None,
    )
    async with worker:
        harness = Harness(dsmo, store, task_queue, outbox, stack_settings)
        yield harness
    await harness.replay_all()


@pytest.fixture
def slice_definition() -> AgentDefinition:
    return definition_from(REPO / "examples" / "candidate_screening.yaml")


def definition_from(path: Path) -> AgentDefinition:
    return parse_definition_text(path.read_text(), source=str(path))


@pytest.fixture
def repo() -> Iterator[Path]:
    yield REPO


async def start_time_skipping() -> WorkflowEnvironment:
    binary = str(Path(sys.executable).parent / "temporal-test-server")
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=binary if Path(binary).exists() else shutil.which("temporal-test-server"),
    )
    await ensure_search_attributes_on(env.client)
    return env


# How long one skip may take to answer: the server does all the work due meanwhile before it does,
# which on a busy machine outlasts the client's default deadline ("Timeout expired").
SKIP_DEADLINE = timedelta(minutes=3)


async def skip_time(env: WorkflowEnvironment, by: timedelta, *, step: timedelta = timedelta(hours=6)) -> None:
    """Skip ``by`` on the time-skipping server, in calls of at most ``step`` (each does the work due
    in its span before it answers), each given `SKIP_DEADLINE` to answer."""
    while by > timedelta(0):
        request = SleepRequest()
        request.duration.FromTimedelta(min(by, step))
        await env.client.test_service.unlock_time_skipping_with_sleep(request, timeout=SKIP_DEADLINE)
        by -= step


@pytest_asyncio.fixture(scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture
async def skipping(
    time_env: WorkflowEnvironment,
    store: ArtifactStore,
    stack_settings: Settings,
    actions: ActionRegistry,
    tmp_path: Path,
) -> AsyncIterator[Harness]:
    task_queue = f"skip-{uuid.uuid4().hex[:10]}"
    outbox = tmp_path / "outbox"
    async with build_worker(
        time_env.client, task_queue=task_queue, store=store, channel=FileChannel(outbox), actions=actions
    ):
        yield Harness(DsmoClient(time_env.client, stack_settings), store, task_queue, outbox, stack_settings)


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    """A new virtualenv holding DSMO's wheel (built once per session) and no DSMO source."""
    workdir = tmp_path_factory.mktemp("wheel")
    return create(workdir / "venv", build_wheel(workdir))
