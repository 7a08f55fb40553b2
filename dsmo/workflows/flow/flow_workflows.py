"""The small workflows flow control runs beside the runs: one per lock, throttle bucket or debounced key."""

from __future__ import annotations

from dsmo.workflows.flow.debouncer import StartDebouncer
from dsmo.workflows.flow.key_locks import KeyLocks
from dsmo.workflows.flow.rate_limiter import AgentRateLimiter
from dsmo.workflows.flow.throttle_bucket import KeyThrottle

# Registered by every worker beside AgentExecution.
FLOW_WORKFLOWS: tuple[type, ...] = (AgentRateLimiter, KeyLocks, StartDebouncer, KeyThrottle)
