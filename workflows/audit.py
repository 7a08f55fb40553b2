"""The run's audit trail: append-only, numbered, built by the workflow alone (so replay rebuilds it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from dsmo.workflows.records import AuditEvent, AuditType

# The paper's "essential" trail is every contract event; these are added at the "extended" level,
# as are the inference metadata processors report (model, temperature, top_p, seed, prompt version).
EXTENDED_ONLY: frozenset[str] = frozenset({"ACTION_COMPLETED"})


class AuditTrail:
    def __init__(
        self,
        run_id: str,
        workflow_version: str,
        level: str = "essential",
        on_record: Callable[[AuditEvent], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.workflow_version = workflow_version
        self.level = level
        self.events: list[AuditEvent] = []
        self.on_record = on_record

    @property
    def extended(self) -> bool:
        return self.level == "extended"

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
    ) -> AuditEvent | None:
        if event_type in EXTENDED_ONLY and not self.extended:
            return None
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
        if self.on_record is not None:
            self.on_record(event)
        return event

    def of_type(self, event_type: AuditType) -> list[AuditEvent]:
        return [event for event in self.events if event.type == event_type]
