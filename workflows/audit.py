"""The run's audit trail: append-only, numbered, built by the workflow alone (so replay rebuilds it)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from workflows.records import AuditEvent, AuditType


class AuditTrail:
    def __init__(self, run_id: str, workflow_version: str) -> None:
        self.run_id = run_id
        self.workflow_version = workflow_version
        self.events: list[AuditEvent] = []

    def record(
        self,
        event_type: AuditType,
        *,
        at: datetime,
        stage: str | None = None,
        attempt: int | None = None,
        agent_version: str | None = None,
        artifact_uris: Iterable[str] = (),
        data: dict[str, Any] | None = None,
    ) -> AuditEvent:
        event = AuditEvent(
            seq=len(self.events) + 1,
            type=event_type,
            run_id=self.run_id,
            at=at,
            stage=stage,
            attempt=attempt,
            workflow_version=self.workflow_version,
            agent_version=agent_version,
            artifact_uris=list(artifact_uris),
            data=data or {},
        )
        self.events.append(event)
        return event

    def of_type(self, event_type: AuditType) -> list[AuditEvent]:
        return [event for event in self.events if event.type == event_type]
