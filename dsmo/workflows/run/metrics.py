"""The paper's operational metrics, counted from the audit trail through Temporal's workflow
metric meter (which skips replays, so nothing is counted twice)."""

from __future__ import annotations

from temporalio import workflow

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
    elif event.type in ("RUN_COMPLETED", "RUN_ABORTED") and replay_of is not None:
        status = str(event.data.get("status", "unknown"))
        meter.create_counter("dsmo_replays", "replays run, by final status").add(1, {"status": status})


def _agent(event: AuditEvent) -> str:
    return str(event.data.get("agent", "")) if event.type == "RUN_CREATED" else ""
