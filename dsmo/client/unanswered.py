"""Why a run gave no answer: a failing workflow task, no worker, an ended run, or the server.

Temporal answers a query, an update or a wait for a result with a transport error or not at all
when the run cannot take its turn; these functions ask Temporal why, so the client's error names
the cause in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from dsmo.client import run_health
from dsmo.client.client_errors import NoWorker, RunClosed, WorkflowTaskFailing
from dsmo.client.rpc_errors import rpc_error
from dsmo.config.settings import Settings
from dsmo.runtime.task_queue_pollers import live_pollers
from dsmo.workflows.common.errors import DsmoError

T = TypeVar("T")

# A query waits for a worker to answer; one that has not in this long is not coming.
QUERY_TIMEOUT = timedelta(seconds=10)
# How often a wait for a run's result looks for a failing workflow task: first after this
# long (seconds), then twice as long each time up to the maximum. Every look is a `describe`
# and a history read; at 1 s, 50 runs awaited at once under load added a call per slow answer,
# so the first look waits past a healthy run's usual answer and a failing task is named a few
# seconds later instead.
WATCH_FIRST, WATCH_MAX = 4.0, 16.0
# Temporal's answer to an update dropped with the workflow task that carried it, and how many
# times such an update is sent (each drop needs another request racing it).
DROPPED_WITH_TASK = "due to unexpected workflow task failure"
# ... or whose run continued as new (or closed) before it took it: the next generation (a new
# workflow task) takes it, or says the run has ended.
ABORTED_WITH_RUN = "update was aborted"
UPDATE_SENDS = 5
# How long a request to a run whose queue shows no worker waits for one to show before it is
# refused (seconds), and how often it looks: a worker that has just started has not polled yet.
NO_WORKER_GRACE, NO_WORKER_LOOK = 3.0, 0.5


async def query_error(
    temporal: Client, settings: Settings, handle: WorkflowHandle[Any, Any], name: str, err: RPCError
) -> DsmoError:
    """Why the query (or update) ``name`` to the run of ``handle`` got no answer.

    Args:
        temporal: The client to ask Temporal with.
        settings: The client's settings (for the error's hints).
        handle: The run's handle.
        name: The query or update that got no answer.
        err: What Temporal answered.

    Returns:
        `WorkflowTaskFailing`, `NoWorker`, or the error ``err`` maps to.
    """
    run_id = handle.id
    failed_task = "workflow task in failed state" in str(err).lower()
    # The client's own deadline ends the call as "Timeout expired" (CANCELLED).
    # A query nobody answers may also end as an "h2 protocol error" (seen when the run's worker
    # has just stopped and still counts as polling): it is the same unanswered query.
    timed_out = err.status == RPCStatusCode.DEADLINE_EXCEEDED or any(
        sign in str(err).lower() for sign in ("timeout expired", "h2 protocol error")
    )
    # Temporal refuses a query at once when no worker has polled the run's queue lately.
    no_poller = "no poller seen" in str(err).lower()
    try:
        described = await handle.describe()
        failure = await run_health.workflow_task_failure(temporal, described)
        polling = await live_pollers(temporal, described.task_queue)
    except (RPCError, TypeError, ValueError):
        return rpc_error(settings, run_id, err)
    # Whatever the error says: a query to a run whose task fails can also end as a transport
    # error (an "h2 protocol error" when the failure's text overflows the reply's headers).
    if failure is not None:
        return WorkflowTaskFailing(f"run {run_id!r}: {run_health.failing_hint(failure)}")
    if not failed_task and not timed_out and not no_poller:
        return rpc_error(settings, run_id, err)
    if not polling or no_poller:
        return NoWorker(f"run {run_id!r}: {run_health.no_worker_hint(described.task_queue)}")
    if failed_task:
        return WorkflowTaskFailing(f"run {run_id!r}: its workflow task failed; `dsmo status {run_id}` shows why")
    # The server answered `describe` just now, so a query cut short by a transport error
    # was still not answered by a worker; the error says which way it ended.
    ended = (
        f"within {QUERY_TIMEOUT.seconds} s" if "h2 protocol error" not in str(err).lower() else "(h2 protocol error)"
    )
    return NoWorker(
        f"run {run_id!r}: no worker answered the {name} query {ended} "
        f"(task queue `{described.task_queue}`); is the worker busy or stopped?"
    )


async def worker_shows(worker_polling: Callable[[str], Awaitable[bool]], task_queue: str) -> bool:
    """Whether a worker polls ``task_queue``, or starts to within `NO_WORKER_GRACE` seconds.

    Args:
        worker_polling: The client's own question (`ClientCore.worker_polling`).
        task_queue: The queue a request is about to be sent to.

    Returns:
        False only when no worker was seen at any look.
    """
    deadline = asyncio.get_running_loop().time() + NO_WORKER_GRACE
    while not await worker_polling(task_queue):
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(NO_WORKER_LOOK)
    return True


async def closed_or_missing(settings: Settings, handle: WorkflowHandle[Any, Any], err: RPCError) -> DsmoError:
    """NOT_FOUND for an update means either no such run or one that has ended: ask which.

    Args:
        settings: The client's settings (for the error's hints).
        handle: The run's handle.
        err: What Temporal answered.

    Returns:
        `RunClosed` for a run that has ended, else the error ``err`` maps to.
    """
    if err.status != RPCStatusCode.NOT_FOUND:
        return rpc_error(settings, handle.id, err)
    try:
        described = await handle.describe()
    except RPCError:
        return rpc_error(settings, handle.id, err)
    if described.close_time is not None:
        return RunClosed(f"run {handle.id!r} has already ended; it is not waiting for any event")
    return rpc_error(settings, handle.id, err)


async def unless_failing(
    temporal: Client, handle: WorkflowHandle[Any, Any], call: Coroutine[Any, Any, T], *, sent: str | None = None
) -> T:
    """Await ``call``, unless the run's workflow task is failing (or, for a request, no worker is left).

    A result would then wait for ever, and an update ~20 s for the server's refusal. A request
    to the run (``sent``) also waits for ever once no worker polls the run's queue: Temporal
    keeps it until one does. A result is not watched for that: a run may outlive its workers'
    restarts, and waiting for its end is what the caller asked.

    Args:
        temporal: The client to ask Temporal with.
        handle: The run's handle.
        call: What to await.
        sent: The request ``call`` sends to the run (``deliver_event``), if any: the watch
            then also gives up once no worker has polled the run's queue lately.

    Returns:
        What ``call`` returns.

    Raises:
        WorkflowTaskFailing: The run's workflow task fails, soon after it is seen failing.
        NoWorker: ``sent``, and no worker polls the run's queue any more (seen on a later look).
    """
    outcome = asyncio.ensure_future(call)
    watch = asyncio.ensure_future(_watch_workflow_task(temporal, handle, sent))
    try:
        await asyncio.wait({outcome, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (outcome, watch):
            if not task.done():
                task.cancel()
                # A call cancelled mid-flight may still end with its own error: nobody waits for it.
                task.add_done_callback(_retrieved)
    if outcome.done() and not outcome.cancelled():
        return outcome.result()
    watch.result()  # raises WorkflowTaskFailing
    raise AssertionError("unreachable: the watch only ends by raising")


async def update_run(
    temporal: Client, handle: WorkflowHandle[Any, Any], name: str, arg: Any, result_type: type[T]
) -> T:
    """Send the update ``name`` and await the run's answer, unless its workflow task is failing.

    Temporal drops an update whose workflow task failed as it carried it (a cancel or a signal
    that arrived meanwhile fails that task as an unhandled command): nothing of it was recorded,
    so it is sent again, and the run answers it (takes it, or refuses it with the reason). So is
    one Temporal aborted because the run continued as new before taking it: the next generation
    answers it (an event's id keeps a resent event from being taken twice).

    Raises:
        WorkflowTaskFailing: The run's workflow task fails, soon after it is seen failing.
        NoWorker: No worker polls the run's queue any more (the update was sent: a worker that
            polls again later may still take it).
        RPCError: What Temporal answered, when it is not a dropped update (or one dropped every time).
    """
    for attempt in range(1, UPDATE_SENDS + 1):
        try:
            return await unless_failing(
                temporal, handle, handle.execute_update(name, arg, result_type=result_type), sent=name
            )
        except RPCError as err:
            resent = any(sign in str(err).lower() for sign in (DROPPED_WITH_TASK, ABORTED_WITH_RUN))
            if not resent or attempt == UPDATE_SENDS:
                raise
    raise AssertionError("unreachable: the last send returns or raises")


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _watch_workflow_task(temporal: Client, handle: WorkflowHandle[Any, Any], sent: str | None) -> None:
    delay = WATCH_FIRST
    while True:
        await asyncio.sleep(delay)
        delay = min(delay * 2, WATCH_MAX)
        try:
            described = await handle.describe()
            failure = await run_health.workflow_task_failure(temporal, described)
            # Not polled within `POLLER_LIVE_FOR`: a worker merely restarting is back well before.
            gone = (
                sent is not None
                and described.close_time is None
                and not await live_pollers(temporal, described.task_queue)
            )
        except (RPCError, TypeError, ValueError):
            continue  # the result's own call reports what is wrong with the server
        if failure is not None:
            raise WorkflowTaskFailing(f"run {handle.id!r}: {run_health.failing_hint(failure)}")
        if gone:
            raise NoWorker(
                f"run {handle.id!r}: {run_health.no_worker_hint(described.task_queue)}; the {sent} request "
                "was sent before its worker stopped, and a worker that polls the queue again may still take it"
            )
