"""Who uses the console: sign-in with an API key, the session cookie, scopes and CSRF checks.

Pages ask for a `Viewer` with a scope; a request without a valid session is sent to the sign-in
page, one whose key lacks the scope gets a 403 page naming it. Every form carries a CSRF token
bound to the session; a POST without a valid one is refused before anything else happens.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import Request

from dsmo.server.api_keys import ApiKey, KeyStore
from dsmo.server.console.session import (
    PRESESSION_COOKIE,
    SESSION_COOKIE,
    SESSION_SECONDS,
    Session,
    Signer,
    key_fingerprint,
)
from dsmo.server.console.signed_out import SignedOut

CONSOLE = "/console"
CSRF_FIELD = "csrf_token"


class ConsoleProblem(Exception):
    """An answer other than the page asked for, rendered as an HTML page.

    Args:
        status: The HTTP status code.
        message: One line for the person.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class SignInRequired(Exception):
    """No valid session: the console redirects to the sign-in page, then back to ``next_path``."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


@dataclass(frozen=True)
class Viewer:
    """A signed-in person: the key they signed in with and their session."""

    key: ApiKey
    session: Session
    signer: Signer

    def allows(self, scope: str) -> bool:
        """Whether the key holds ``scope``."""
        return self.key.allows(scope)

    def csrf(self) -> str:
        """A token for one form of this session."""
        return self.signer.csrf_token(self.session.binding)


def signer(request: Request) -> Signer:
    """The app's signer (created with the console)."""
    found: Signer = request.app.state.console_signer
    return found


def current_viewer(request: Request) -> Viewer | None:
    """The signed-in viewer, or None; signing out, or a revoked or replaced key, ends the session."""
    session = signer(request).session(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return None
    ended: SignedOut = request.app.state.console_signed_out
    if session.session_id in ended:
        return None
    keys: KeyStore = request.app.state.keys
    key = keys.named(session.key_name)
    if key is None or key_fingerprint(key.key_hash) != session.key_fingerprint:
        return None
    return Viewer(key, session, signer(request))


def viewer_with(scope: str) -> Callable[[Request], Viewer]:
    """A dependency: the signed-in viewer whose key holds ``scope``."""

    def check(request: Request) -> Viewer:
        viewer = current_viewer(request)
        if viewer is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise SignInRequired(target)
        if not viewer.allows(scope):
            raise ConsoleProblem(403, f"key {viewer.key.name!r} lacks the scope {scope!r}")
        return viewer

    return check


def signed_in(request: Request) -> Viewer:
    """A dependency: any signed-in viewer (forms check their own scope)."""
    viewer = current_viewer(request)
    if viewer is None:
        raise SignInRequired(request.url.path)
    return viewer


def check_csrf(viewer: Viewer, token: str | None) -> None:
    """Refuse a form whose token was not issued to this session."""
    if not viewer.signer.csrf_valid(token, viewer.session.binding):
        raise ConsoleProblem(403, f"{CSRF_FIELD}: missing or not issued to this session; reload the page and retry")


def presession(request: Request) -> tuple[str, bool]:
    """The sign-in form's binding cookie value, and whether it must be set now."""
    value = request.cookies.get(PRESESSION_COOKIE)
    if value and len(value) == 32:
        return value, False
    return secrets.token_hex(16), True


def safe_next(target: str | None) -> str:
    """Where to go after signing in: only a path of the console itself (no open redirect)."""
    if target and target.startswith(f"{CONSOLE}/") and not target.startswith("//") and "\\" not in target:
        return target
    return f"{CONSOLE}/"


def sign_in_url(next_path: str) -> str:
    """The sign-in page, coming back to ``next_path`` afterwards."""
    return f"{CONSOLE}/login?next={quote(safe_next(next_path), safe='/')}"


def cookie_options(request: Request) -> dict[str, object]:
    """HttpOnly, SameSite=Lax, Secure behind HTTPS, scoped to the console.

    Lax, not Strict: an upload comes back from the object store by a redirect, which may be
    another site; every form still carries a CSRF token.
    """
    return {
        "httponly": True,
        "samesite": "lax",
        "secure": request.url.scheme == "https",
        "path": CONSOLE,
        "max_age": SESSION_SECONDS,
    }
