"""The paper's operational metrics, counted from the audit trail through Temporal's workflow
metric meter (which skips replays, so nothing is counted twice)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import MetricMeter

from dsmo.workflows.contracts.run_records import AuditEvent


def count_event(event: AuditEvent, *, replay_of: str | None = None) -> None:
    meter = workflow.metric_meter()
    labels = {"agent": _agent(event), "type": event.type}
    meter.create_counter("dsmo_audit_events", "audit events recorded, by type").add(1, labels)
    if event.type == "DUPLICATE_IGNORED":
        meter.create_counter("dsmo_duplicates_ignored", "duplicate completions and events ignored").add(1)
    elif event.type == "STAGE_FAILED":
        reason = str(event.data.get("errorType") or event.data.get("error", "Error"))[:64]
        meter.create_counter("dsmo_stage_failures", "stage attempts that failed, by reason").add(
            1, {"reason": reason, "kind": str(event.data.get("kind", "unknown"))}
        )
    elif event.type == "DEAD_LETTERED":
        meter.create_counter("dsmo_dead_letters", "stages sent to the DLQ").add(1)
    elif event.type == "STAGE_SUCCEEDED" and isinstance(event.data.get("llm"), dict):
        _count_model_spend(meter, event.data["llm"])
    elif event.type in ("RUN_COMPLETED", "RUN_ABORTED") and replay_of is not None:
        status = str(event.data.get("status", "unknown"))
        meter.create_counter("dsmo_replays", "replays run, by final status").add(1, {"status": status})


def _count_model_spend(meter: MetricMeter, inference: dict[str, Any]) -> None:
    """An `llm` stage's tokens and cost, named as OpenTelemetry's GenAI conventions name them
    (`gen_ai.client.token.usage` by `gen_ai.token.type`; dots become underscores in Prometheus)."""
    model = str(inference.get("model") or inference.get("requestedModel") or "")[:100]
    usage = inference.get("usage") if isinstance(inference.get("usage"), dict) else {}
    tokens = meter.create_histogram("gen_ai_client_token_usage", "tokens per model call, by type", "{token}")
    for kind, field in (("input", "prompt_tokens"), ("output", "completion_tokens")):
        counted = usage.get(field) if isinstance(usage, dict) else None
        if isinstance(counted, int) and not isinstance(counted, bool):
            tokens.record(counted, {"gen_ai_token_type": kind, "gen_ai_request_model": model})
    cost = inference.get("costUsd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        spent = meter.create_histogram_float("dsmo_llm_cost_usd", "what an llm stage's model calls cost", "USD")
        spent.record(float(cost), {"gen_ai_request_model": model})


def _agent(event: AuditEvent) -> str:
    return str(event.data.get("agent", "")) if event.type == "RUN_CREATED" else ""
