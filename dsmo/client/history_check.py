"""Is a run's Temporal history still deterministic on this process's workflow code?

Temporal's `Replayer` runs the history through the workflows this worker registers, the way a
worker would after a restart: a change to `dsmo/workflows/` that a running run cannot take shows
here before it is deployed (`dsmo verify`).
"""

from __future__ import annotations

from temporalio.service import RPCError
from temporalio.worker import Replayer

from dsmo.client.core import ClientCore
from dsmo.client.payloads import PYDANTIC_DATA_CONVERTER
from dsmo.client.rpc_errors import rpc_error
from dsmo.workflows.common.sandbox import sandbox_runner
from dsmo.workflows.engine.agent_execution import AgentExecution
from dsmo.workflows.flow.flow_workflows import FLOW_WORKFLOWS
from dsmo.workflows.lifecycle.retention_sweep import RetentionSweep


async def verify_history(core: ClientCore, run_id: str) -> str | None:
    """Replay the run's Temporal history on the current code; None if deterministic, else the problem.

    Raises:
        RunNotFound: No run has this id.
    """
    try:
        history = await core.temporal.get_workflow_handle(run_id).fetch_history()
    except RPCError as err:
        raise rpc_error(core.settings, run_id, err) from None
    replayer = Replayer(
        workflows=[AgentExecution, *FLOW_WORKFLOWS, RetentionSweep],
        data_converter=PYDANTIC_DATA_CONVERTER,
        workflow_runner=sandbox_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return None if result.replay_failure is None else str(result.replay_failure)
