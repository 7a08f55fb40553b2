"""How one worker runs: the plugins it loads, how much it does at once, its sandbox and metrics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dsmo.config.env_values import EnvReader, on_off


@dataclass(frozen=True)
class WorkerSettings:
    """A worker's plugins, concurrency bounds, workflow sandbox and metrics endpoint.

    Attributes:
        load: Plugin modules the worker imports, comma-separated [``DSMO_LOAD``].
        max_concurrent_activities: Activities one worker runs at once, at least 1 (local stages
            have their own bound: Temporal's default) [``DSMO_MAX_CONCURRENT_ACTIVITIES``].
        processor_threads: Threads for plain processors and activities, at least 1
            [``DSMO_PROCESSOR_THREADS``].
        max_concurrent_workflow_tasks: Workflow tasks one worker holds at once, at least 2
            [``DSMO_MAX_CONCURRENT_WORKFLOW_TASKS``].
        max_cached_workflows: Runs one worker keeps in memory between their workflow tasks; a
            run not kept is replayed from its history at its next task; at least 1 (with none kept,
            a run's local stages are lost at every task) [``DSMO_MAX_CACHED_WORKFLOWS``].
        sandbox: Run workflows in Temporal's sandbox [``DSMO_WORKFLOW_SANDBOX``].
        metrics_bind: Where the worker serves Prometheus metrics; empty (``off``) for nowhere
            [``DSMO_METRICS_BIND``].
        slot_holder_check_seconds: How often a concurrency key's lock asks Temporal whether its
            holders still run, while a run waits in line: the longest a slot left by a terminated
            run blocks the line [``DSMO_SLOT_HOLDER_CHECK_SECONDS``].
        hooks_allow_private: Let webhooks POST to loopback, private and link-local addresses (off:
            a subscription cannot make workers reach the inside of their network)
            [``DSMO_HOOKS_ALLOW_PRIVATE``].
        log_level: The least severe log line the worker writes: ``debug``, ``info`` (a run's
            state changes, about a line per step), ``warning`` or ``error`` [``DSMO_LOG_LEVEL``].
    """

    LOG_LEVELS: ClassVar[tuple[str, ...]] = ("debug", "info", "warning", "error")

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        # Plugins the worker imports at start (comma-separated modules), beside the `dsmo.plugins` entry points.
        "DSMO_LOAD": "",
        # Activities one worker runs at once, and the threads for plain (non-async) processors and
        # activities. Raise the first for async agents (model calls): they wait on the event loop.
        "DSMO_MAX_CONCURRENT_ACTIVITIES": "16",
        "DSMO_PROCESSOR_THREADS": "16",
        # Workflow tasks one worker holds at once (Temporal's default; see dsmo.worker.WORKFLOW_TASK_SLOTS).
        "DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": "100",
        # Runs a worker keeps in memory between their tasks (Temporal's default). A run evicted
        # is replayed in full at its next task: raise it when many runs resume at once.
        "DSMO_MAX_CACHED_WORKFLOWS": "1000",
        # Temporal's workflow sandbox: off by default (DSMO's workflow code is fixed and checked for
        # determinism by its tests; the sandbox costs ~10 ms of worker CPU per run); the suite runs with it on.
        "DSMO_WORKFLOW_SANDBOX": "off",
        "DSMO_METRICS_BIND": "127.0.0.1:9464",
        # While a run waits for a concurrency key's slot, its lock checks this often that the
        # holders still run (a terminated one never gives its slot back).
        "DSMO_SLOT_HOLDER_CHECK_SECONDS": "60",
        # Webhooks to loopback, private and link-local addresses (a receiver on the same host or network).
        "DSMO_HOOKS_ALLOW_PRIVATE": "off",
        # The worker's log: `info` writes a line per step of every run (the run's own trail
        # records every step too); `warning` keeps only what needs a look.
        "DSMO_LOG_LEVEL": "info",
    }

    load: str = ""
    max_concurrent_activities: int = 16
    processor_threads: int = 16
    max_concurrent_workflow_tasks: int = 100
    max_cached_workflows: int = 1000
    sandbox: bool = False
    metrics_bind: str = "127.0.0.1:9464"
    slot_holder_check_seconds: int = 60
    hooks_allow_private: bool = False
    log_level: str = "info"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        """Read and check this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings; a bound below its floor is raised to it.

        Raises:
            SettingsError: A value is invalid.
        """
        read = EnvReader(env, cls.VARIABLES)
        return cls(
            load=read.text("DSMO_LOAD"),
            max_concurrent_activities=read.whole_number("DSMO_MAX_CONCURRENT_ACTIVITIES", at_least=1),
            processor_threads=read.whole_number("DSMO_PROCESSOR_THREADS", at_least=1),
            # Temporal needs two workflow-task slots while workflows are cached.
            max_concurrent_workflow_tasks=read.whole_number("DSMO_MAX_CONCURRENT_WORKFLOW_TASKS", at_least=2),
            max_cached_workflows=read.whole_number("DSMO_MAX_CACHED_WORKFLOWS", at_least=1),
            sandbox=workflow_sandbox_from(env),
            metrics_bind="" if env.get("DSMO_METRICS_BIND") == "off" else read.text("DSMO_METRICS_BIND"),
            slot_holder_check_seconds=read.whole_number("DSMO_SLOT_HOLDER_CHECK_SECONDS", at_least=1),
            hooks_allow_private=read.switch("DSMO_HOOKS_ALLOW_PRIVATE"),
            log_level=read.one_of("DSMO_LOG_LEVEL", cls.LOG_LEVELS),
        )

    def to_env(self) -> dict[str, str]:
        """The variables that make another process read these settings.

        Returns:
            Variable names and values.
        """
        return {
            "DSMO_LOAD": self.load,
            "DSMO_MAX_CONCURRENT_ACTIVITIES": str(self.max_concurrent_activities),
            "DSMO_PROCESSOR_THREADS": str(self.processor_threads),
            "DSMO_MAX_CONCURRENT_WORKFLOW_TASKS": str(self.max_concurrent_workflow_tasks),
            "DSMO_MAX_CACHED_WORKFLOWS": str(self.max_cached_workflows),
            "DSMO_WORKFLOW_SANDBOX": on_off(self.sandbox),
            "DSMO_METRICS_BIND": self.metrics_bind or "off",
            "DSMO_SLOT_HOLDER_CHECK_SECONDS": str(self.slot_holder_check_seconds),
            "DSMO_HOOKS_ALLOW_PRIVATE": on_off(self.hooks_allow_private),
            "DSMO_LOG_LEVEL": self.log_level,
        }


def workflow_sandbox_from(env: Mapping[str, str]) -> bool:
    """``DSMO_WORKFLOW_SANDBOX``: run workflows inside Temporal's sandbox (on/off).

    Args:
        env: The environment.

    Returns:
        True for on.

    Raises:
        SettingsError: The value is neither on nor off.
    """
    return EnvReader(env, WorkerSettings.VARIABLES).switch("DSMO_WORKFLOW_SANDBOX")
