"""Routes of a run's events resource: deliver a resume event."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Header, Request

from dsmo.client.client_errors import EventMalformed, EventNotAccepted, RunClosed, RunNotFound
from dsmo.client.dsmo_client import DsmoClient
from dsmo.server.api_keys import DECISION_EVENTS
from dsmo.server.ingress.bodies import EventRequest, StrictJsonRoute
from dsmo.server.ingress.dependencies import dsmo_client, presented, verify_key
from dsmo.server.ingress.problems import BODY_ERRORS, Problem, documented

router = APIRouter(prefix="/executions/{run_id}/events", tags=["events"], route_class=StrictJsonRoute)


@router.post(
    "", status_code=202, summary="Deliver a resume event to a run", responses={**documented(404, 409), **BODY_ERRORS}
)
async def deliver(
    run_id: str,
    body: EventRequest,
    request: Request,
    idempotency_key: str | None = Header(default=None),
    sent: tuple[str | None, str | None] = Depends(presented),
    dsmo: DsmoClient = Depends(dsmo_client),
) -> dict[str, Any]:
    # The scope depends on the event's type, which is known only once the body is parsed.
    key = verify_key(request.app.state.keys, f"events:{body.type}", *sent)
    if body.event_id and idempotency_key and body.event_id != idempotency_key:
        # Either could be the one the sender retries under: taking one silently could apply the
        # event twice (a retry under the other) or drop a different event as a duplicate.
        raise Problem(
            422,
            "invalid_body",
            f"event_id: {body.event_id[:80]!r} differs from the Idempotency-Key header {idempotency_key[:80]!r}; "
            "send one, or both alike",
        )
    event_id = body.event_id or idempotency_key
    if not event_id:
        raise Problem(422, "invalid_body", "event_id: required (in the body or as the Idempotency-Key header)")
    data = body.data
    if body.type in DECISION_EVENTS:  # who decided is the key, and who its holder says they are
        claimed = data.get("by")
        data = {**data, "by": f"{key.name} ({claimed[:120]})" if isinstance(claimed, str) and claimed else key.name}
    try:
        ack = await dsmo.deliver_event(run_id, body.type, data, event_id=event_id)
    except EventMalformed as err:  # the client asked well_formed before sending: the run's own words
        raise Problem(422, "invalid_event", str(err.problem)) from None
    except RunNotFound as err:
        raise Problem(404, "run_not_found", str(err)) from None
    except (EventNotAccepted, RunClosed) as err:
        raise Problem(409, "not_accepted", str(err)) from None
    return ack.model_dump(mode="json")
