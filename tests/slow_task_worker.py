"""The real DSMO worker process plus one workflow whose every task runs far past Temporal's
deadlock timeout, logging all the while: what a pathological run does to a shared worker.

    python -m tests.slow_task_worker
"""

from __future__ import annotations

import time

from temporalio import workflow

SPIN_SECONDS = 3.5


# Unsandboxed: it reads the wall clock on purpose, to stay busy past the 2 s deadlock timeout.
@workflow.defn(sandboxed=False)
class SlowTask:
    """Spins and logs in its first task; the task fails as a potential deadlock and is retried."""

    @workflow.run
    async def run(self) -> str:
        until = time.monotonic() + SPIN_SECONDS
        spins = 0
        while time.monotonic() < until:
            # Logging in the hot loop makes the deadlock detector's interruption land inside a
            # logging call, the case that used to leave a handler lock held for good.
            workflow.logger.info("spin %d", spins)
            spins += 1
        return f"{spins} spins"


def main() -> None:
    from dsmo import worker

    worker.main(extra_workflows=[SlowTask])


if __name__ == "__main__":
    main()
