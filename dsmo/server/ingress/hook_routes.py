"""Routes of the hooks resource: webhook subscriptions, and deliveries past their budget (scope ``operate``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.hooks_client import HookError
from dsmo.server.api_keys import ApiKey
from dsmo.server.ingress.bodies import HookRequest, StrictJsonRoute
from dsmo.server.ingress.dependencies import can_operate, dsmo_client
from dsmo.server.ingress.problems import BODY_ERRORS, Problem, documented

router = APIRouter(prefix="/hooks", tags=["hooks"], route_class=StrictJsonRoute)


@router.post(
    "",
    status_code=201,
    summary="Subscribe a URL to runs' events (the secret is shown once)",
    responses=BODY_ERRORS,
)
async def add(
    body: HookRequest, key: ApiKey = Depends(can_operate), dsmo: DsmoClient = Depends(dsmo_client)
) -> dict[str, Any]:
    try:
        made = await dsmo.hooks.add(
            body.url,
            body.events,
            agent=body.agent,
            max_attempts=body.max_attempts,
            first_retry_seconds=body.first_retry_seconds,
        )
    except HookError as err:
        raise Problem(422, err.code, str(err)) from None
    return {**made.shown(), "secret": made.secret}


@router.get("", summary="The subscriptions (without their secrets)")
async def listed(key: ApiKey = Depends(can_operate), dsmo: DsmoClient = Depends(dsmo_client)) -> dict[str, Any]:
    return {"hooks": [made.shown() for made in await dsmo.hooks()]}


@router.delete("/{subscription_id}", summary="Remove a subscription", responses=documented(404))
async def remove(
    subscription_id: str, key: ApiKey = Depends(can_operate), dsmo: DsmoClient = Depends(dsmo_client)
) -> dict[str, Any]:
    if not await dsmo.hooks.remove(subscription_id):
        raise Problem(404, "hook_not_found", f"no subscription {subscription_id!r}")
    return {"id": subscription_id, "removed": True}


@router.get("/failed", summary="Deliveries past their budget")
async def failed(key: ApiKey = Depends(can_operate), dsmo: DsmoClient = Depends(dsmo_client)) -> dict[str, Any]:
    return {"failed": await dsmo.hooks.failed()}


@router.post(
    "/failed/{delivery_id}/redeliver",
    status_code=202,
    summary="Deliver a failed delivery again",
    responses=documented(404),
)
async def redeliver(
    delivery_id: str, key: ApiKey = Depends(can_operate), dsmo: DsmoClient = Depends(dsmo_client)
) -> dict[str, Any]:
    try:
        workflow_id = await dsmo.hooks.redeliver(delivery_id)
    except HookError as err:
        raise Problem(404, "delivery_not_found", str(err)) from None
    return {"deliveryId": delivery_id, "workflowId": workflow_id}
