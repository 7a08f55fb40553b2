"""The sandbox DSMO's workflows run in when sandboxed (tests, replays, `DSMO_WORKFLOW_SANDBOX=on`)."""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions


def sandbox_runner() -> SandboxedWorkflowRunner:
    """Temporal's sandbox, with DSMO's own modules passed through.

    The `dsmo` package is imported once, outside the sandbox: re-importing it for every run
    cost ~30 ms each, and importing the public API inside the sandbox would load the client.
    """
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("dsmo"))
