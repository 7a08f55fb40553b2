"""What routes ask FastAPI for: the caller's key with a scope, and the objects the app holds.

The app keeps its settings, key store, client and definition store on ``app.state`` (set by
`create_app` and its lifespan), so routers need no closure over them.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import ApiKey, KeyStore, bearer_credential
from dsmo.server.ingress.problems import Problem


def verify_key(keys: KeyStore, scope: str, authorization: str | None, x_api_key: str | None) -> ApiKey:
    """The key presented in either header, if it exists and holds ``scope``.

    Raises:
        Problem: 401 without a key or with an unknown one, 403 when the key lacks ``scope``.
    """
    presented = x_api_key or bearer_credential(authorization)
    if not presented:
        raise Problem(401, "unauthenticated", "send an API key: Authorization: Bearer <key> or X-API-Key")
    key = keys.verify(presented)
    if key is None:
        raise Problem(401, "unauthenticated", "unknown API key")
    if not key.allows(scope):
        raise Problem(403, "forbidden", f"key {key.name!r} lacks the scope {scope!r}")
    return key


# The two ways to present a key, as the API's description names them (its security schemes).
# Neither refuses anything itself: `verify_key` answers in the documented error shape.
BEARER = HTTPBearer(auto_error=False, scheme_name="bearer", description="`Authorization: Bearer <key>`")
API_KEY_HEADER = APIKeyHeader(
    name="X-API-Key", auto_error=False, scheme_name="apiKey", description="`X-API-Key: <key>`"
)


def presented(
    request: Request,
    _: HTTPAuthorizationCredentials | None = Security(BEARER),
    x_api_key: str | None = Security(API_KEY_HEADER),
) -> tuple[str | None, str | None]:
    """The ``Authorization`` and ``X-API-Key`` headers as sent (the first whole: a bare key in it
    is read too), for `verify_key`."""
    return request.headers.get("authorization"), x_api_key


def caller(scope: str) -> Callable[..., ApiKey]:
    """A dependency that returns the caller's key, refusing one without ``scope``."""

    def check(request: Request, sent: tuple[str | None, str | None] = Depends(presented)) -> ApiKey:
        return verify_key(request.app.state.keys, scope, *sent)

    return check


def dsmo_client(request: Request) -> DsmoClient:
    """The app's connected client (opened by the lifespan)."""
    client: DsmoClient = request.app.state.dsmo
    return client


def app_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


# One dependency per route scope; an event's scope is checked in its route (it names the type).
can_start = caller("start")
can_read = caller("read")
can_cancel = caller("cancel")
can_operate = caller("operate")
