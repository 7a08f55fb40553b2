"""Routes that change a run in flight: move it to another version of its agent, or send it back
to an earlier node of its path (the executions resource, beside executions.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from dsmo.client.client_errors import (
    AlreadyOnTarget,
    DefinitionNotFound,
    MigrationNotAccepted,
    RewindNotAccepted,
    RunClosed,
    RunNotFound,
)
from dsmo.client.dsmo_client import DsmoClient
from dsmo.server.api_keys import ApiKey
from dsmo.server.ingress.bodies import MigrateRequest, RewindRequest, StrictJsonRoute
from dsmo.server.ingress.dependencies import can_operate, dsmo_client
from dsmo.server.ingress.problems import BODY_ERRORS, Problem, documented
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import InvalidRunId

router = APIRouter(prefix="/executions", tags=["executions"], route_class=StrictJsonRoute)


@router.post(
    "/{run_id}/migrate",
    summary="Move a run to another published version of its agent",
    responses={**documented(404, 409), **BODY_ERRORS},
)
async def migrate(
    run_id: str,
    body: MigrateRequest,
    key: ApiKey = Depends(can_operate),
    dsmo: DsmoClient = Depends(dsmo_client),
) -> dict[str, Any]:
    """The run's answer to the move (or, with `dryRun`, what the move would do); `by` is the key's name.

    A run already on the target answers 200 with `alreadyOnTarget: true`, so a retry of a move
    that happened is not an error.
    """
    try:
        ack = await dsmo.migrate_run(
            run_id,
            body.to,
            node_map=body.node_map,
            leave_wait=body.leave_wait,
            restart_timers=body.restart_timers,
            set_variables=body.set,
            reason=body.reason,
            by=key.name,
            dry_run=body.dry_run,
        )
    except RunNotFound as err:
        raise Problem(404, "run_not_found", str(err)) from None
    except DefinitionNotFound as err:
        raise Problem(404, "unknown_version", str(err)) from None
    except RunClosed as err:
        raise Problem(409, "run_closed", str(err)) from None
    except AlreadyOnTarget as err:
        return {"runId": run_id, "alreadyOnTarget": True, "dryRun": body.dry_run, "detail": str(err)}
    except MigrationNotAccepted as err:
        raise Problem(409, "migration_refused", str(err)) from None
    return {**ack.model_dump(mode="json"), "alreadyOnTarget": False, "dryRun": body.dry_run}


@router.post(
    "/{run_id}/rewind",
    summary="Send a waiting run back to an earlier node of its path",
    responses={**documented(404, 409), **BODY_ERRORS},
)
async def rewind(
    run_id: str,
    body: RewindRequest,
    key: ApiKey = Depends(can_operate),
    dsmo: DsmoClient = Depends(dsmo_client),
) -> dict[str, Any]:
    """The run's answer: where it was, where it goes back to, the saga steps undone or left.

    The trail records the key's name as who asked (with `requestedBy` beside it when given).
    A refusal writes nothing to the run: 409 when the run cannot go back now (it is not
    waiting, it has ended, a correction fails the definition's checks), 422 when the ask names
    a node the run has not reached or is not a node at all.
    """
    by = f"{key.name} ({body.requested_by})" if body.requested_by else key.name
    try:
        ack = await dsmo.rewind(
            run_id, body.to_node, reason=body.reason, set_variables=body.set, compensate=body.compensate, by=by
        )
    except RunNotFound as err:
        raise Problem(404, "run_not_found", str(err)) from None
    except (RunClosed, RewindNotAccepted) as err:
        raise Problem(409, err.code, str(err)) from None
    except InvalidRunId:
        raise
    except DsmoError as err:
        if type(err) is not DsmoError:  # the client's own conditions (no worker, ...) keep their answers
            raise
        raise Problem(422, RewindNotAccepted.code, _body_field(str(err))) from None
    return ack.model_dump(mode="json")


# The client names the CLI's options; over HTTP the same refusal names the body's fields.
_BODY_FIELDS = {"--to: ": "toNode: ", "--reason: ": "reason: "}


def _body_field(message: str) -> str:
    for option, field in _BODY_FIELDS.items():
        if message.startswith(option):
            return field + message.removeprefix(option)
    return message
