"""Human output for the CLI: status, audit trail and stack reports as plain aligned text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dsmo.client.run_status import spend_line
from dsmo.devstack.stack import ServiceReport
from dsmo.workflows.common.durations import format_duration
from dsmo.workflows.contracts.run_records import AuditEvent, StatusView
from dsmo.workflows.events.inbox import InboxView
from dsmo.workflows.events.resume_events import EventAck

# The audit records of an event's way through the inbox (`dsmo events RUN --inbox`).
INBOX_EVENTS = frozenset({"EVENT_BUFFERED", "EVENT_CONSUMED", "EVENT_EXPIRED", "EVENT_REJECTED", "DUPLICATE_IGNORED"})


def status_lines(view: StatusView, *, run_url: str) -> list[str]:
    rows: list[tuple[str, Any]] = [
        ("run", view.run_id),
        ("agent", f"{view.agent} (workflow_version {view.workflow_version})" if view.agent else None),
        ("status", view.status.value),
        ("problem", view.problem),
        ("node", view.current_node),
        ("pending", view.pending_reason),
        ("throttled", view.throttled),
        ("waitingFor", view.waiting_for),
        ("waitingUntil", _when(view.waiting_until)),
        ("waitingData", json.dumps(view.waiting_data, ensure_ascii=False) if view.waiting_data else None),
        ("inbox", _inbox(view.inbox)),
        ("spent", spend_line(view.usage)),
        ("startedAt", _when(view.started_at)),
        ("completedAt", _when(view.completed_at)),
        ("resultType", view.result_type),
        ("resultSummary", view.result_summary),
        ("errorMessage", view.error_message),
        ("failedActionId", view.failed_action_id),
        ("web UI", run_url),
    ]
    return _aligned((key, value) for key, value in rows if value not in (None, ""))


def ack_line(ack: EventAck, run_id: str, event_type: str | None = None) -> str:
    """One line for a delivered event: delivered, kept in the run's inbox, or a duplicate."""
    what = f"{event_type} {ack.event_id}" if event_type else ack.event_id
    if ack.duplicate:
        return f"duplicate, ignored: {what} to {run_id}"
    if ack.buffered:
        return f"kept: {what} for {run_id} ({ack.detail})"
    return f"delivered: {what} to {run_id}" + (f" ({ack.detail})" if ack.detail else "")


def event_lines(events: Sequence[AuditEvent]) -> list[str]:
    lines = []
    for event in events:
        parts = [f"{event.seq:>3}", event.at.strftime("%H:%M:%S.%f")[:-3], f"{event.type:<18}"]
        parts.append(f"{event.stage or '-':<14}")
        details = []
        if event.attempt is not None:
            details.append(f"attempt={event.attempt}")
        details += [f"{key}={_short(value)}" for key, value in event.data.items()]
        details += event.artifact_uris
        lines.append(" ".join(parts) + " " + " ".join(details))
    return lines


def stack_lines(reports: Iterable[ServiceReport]) -> list[str]:
    lines = []
    for report in reports:
        pid = f"pid {report.pid}" if report.pid else ""
        lines.append(f"{report.name:<9} {report.state:<32} {report.endpoint} {pid}".rstrip())
    return lines


def _aligned(rows: Iterable[tuple[str, Any]]) -> list[str]:
    items = list(rows)
    width = max(len(key) for key, _ in items)
    return [f"{key:<{width}}  {value}" for key, value in items]


def _inbox(inbox: InboxView | None) -> str | None:
    if inbox is None:
        return None
    kinds = ", ".join(f"{kind} {count}" for kind, count in inbox.kinds.items())
    age = format_duration(timedelta(seconds=max(int((datetime.now(UTC) - inbox.oldest_at).total_seconds()), 1)))
    return f"{inbox.count} kept ({kinds}); oldest {inbox.oldest_event_id}, {age} ago"


def _when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"
