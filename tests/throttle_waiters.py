"""A run waiting for a throttle's token, and nothing else: what a bucket's grant signals reach in
tests that drive a `KeyThrottle` alone (a grant to a run that has ended is a signal that fails)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow


@workflow.defn(name="ThrottleWaiter")
class ThrottleWaiter:
    """Takes its token (`SLOT_GRANTED`, as a run's workflow takes it), then ends, or with
    ``stays`` waits on: the time-skipping tests keep every waiter running while the bucket works."""

    def __init__(self) -> None:
        self._granted = False

    @workflow.run
    async def run(self, stays: bool = False) -> None:
        await workflow.wait_condition(lambda: self._granted and not stays)

    @workflow.signal(name="SLOT_GRANTED")
    def take(self, grant: dict[str, Any]) -> None:
        self._granted = True

    @workflow.query
    def granted(self) -> bool:
        return self._granted
