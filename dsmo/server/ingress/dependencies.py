"""What routes ask FastAPI for: the caller's key with a scope, and the objects the app holds.

The app keeps its settings, key store, client and definition store on ``app.state`` (set by
`create_app` and its lifespan), so routers need no closure over them.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Header, Request

from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.server.api_keys import ApiKey, KeyStore
from dsmo.server.ingress.problems import Problem


def bearer_credential(authorization: str | None) -> str:
    """The key an ``Authorization`` header carries: after its ``Bearer`` scheme, named in any case
    (HTTP's schemes are case-insensitive), or the whole header when it names none."""
    scheme, _, rest = (authorization or "").strip().partition(" ")
    return rest.strip() if scheme.lower() == "bearer" else (authorization or "").strip()


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


def caller(scope: str) -> Callable[..., ApiKey]:
    """A dependency that returns the caller's key, refusing one without ``scope``."""

    def check(
        request: Request,
        authorization: str | None = Header(default=None),
        x_api_key: str | None = Header(default=None),
    ) -> ApiKey:
        return verify_key(request.app.state.keys, scope, authorization, x_api_key)

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
