"""Per-update latency, as the client sees it: the update sent until its answer is back.

A client interceptor times every workflow update a Temporal client sends, by update name. A
batch that is driven by code we do not instrument (`DsmoClient.migrate`) is timed the same way
as the bare reference's own calls, so both sides' latencies mean the same thing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    WorkflowUpdateHandle,
)


class UpdateTimer(Interceptor):
    """Collects the seconds each update took, by update name (``seconds["migrate"]``)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, list[float]] = defaultdict(list)

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Timed(next, self)

    def timed(self, client: Client) -> Client:
        """A client like ``client`` (same connection, namespace and converter) whose updates are timed."""
        config: Any = client.config()
        config["interceptors"] = [*config["interceptors"], self]
        return Client(**config)


class _Timed(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, timer: UpdateTimer) -> None:
        super().__init__(next)
        self.timer = timer

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle[Any]:
        # `execute_update` asks to wait for the COMPLETED stage: this call returns with the answer.
        began = time.perf_counter()
        handle = await super().start_workflow_update(input)
        self.timer.seconds[input.update].append(time.perf_counter() - began)
        return handle
