"""Webhook subscriptions and failed deliveries, kept in the object store, and the signature.

A subscription (``hooks/subscriptions/<id>.json``) names a URL, the events it wants (`HOOK_EVENTS`),
optionally one agent, its retry budget, and its secret, which signs every POST: the receiver
checks ``DSMO-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the secret>`` (the
recipe is in the docs). The secret is shown once, when the subscription is made. A delivery past
its budget is kept in ``hooks/failed/<delivery id>.json`` until it is redelivered.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN
from dsmo.workflows.contracts.hook_io import HOOK_EVENTS

SUBSCRIPTIONS = "hooks/subscriptions/"
FAILED = "hooks/failed/"
SIGNATURE_TOLERANCE = 300  # seconds a receiver accepts a signature's time off its own clock
# A host name's label (underscores too: some internal names have them); IDN names are checked in
# their ASCII (punycode) form.
HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")
USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@")


class HookError(DsmoError):
    """A subscription that cannot be made, or a delivery that is not there; the message names the field."""

    code = "invalid_hook"


@dataclass(frozen=True)
class Subscription:
    """Who gets which events of which runs.

    Attributes:
        id: The subscription's id (``hook-<hex>``).
        url: Where each event is POSTed (http or https).
        events: The events it gets (`HOOK_EVENTS`).
        agent: Only runs of this agent; None for every agent.
        secret: What signs each POST (shown once, when the subscription is made).
        created_at: When it was made (ISO 8601).
        max_attempts: POSTs of one event at most before it is set aside as failed.
        first_retry_seconds: The wait before the second POST; each next one doubles (up to 10 min).
    """

    id: str
    url: str
    events: tuple[str, ...]
    agent: str | None
    secret: str
    created_at: str
    max_attempts: int = 12
    first_retry_seconds: float = 1.0

    def matches(self, event: str, agent: str) -> bool:
        return event in self.events and self.agent in (None, agent)

    def shown(self) -> dict[str, Any]:
        """The subscription without its secret (what listing it shows), nor a password in its URL."""
        return {name: value for name, value in asdict(self).items() if name != "secret"} | {"url": shown_url(self.url)}


def shown_url(url: str) -> str:
    """``url`` without the user name and password it may carry (made before they were refused)."""
    return USERINFO.sub(r"\1[redacted]@", url)


def signature(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``DSMO-Signature`` header of ``body``: ``t=<unix time>,v1=<hex HMAC-SHA256>``."""
    stamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={digest}"


def valid_signature(secret: str, header: str, body: bytes, *, now: float | None = None) -> bool:
    """Whether ``header`` signs ``body`` with ``secret``, within `SIGNATURE_TOLERANCE` of ``now``."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if not parts.get("t", "").isdigit() or "v1" not in parts:
        return False
    stamp = int(parts["t"])
    if abs((time.time() if now is None else now) - stamp) > SIGNATURE_TOLERANCE:
        return False
    expected = signature(secret, body, stamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts["v1"])


def checked(
    url: str, events: Sequence[str], max_attempts: int, first_retry_seconds: float, agent: str | None = None
) -> tuple[str, ...]:
    """The subscription's events, once its fields are known to be valid.

    The one check of a subscription, whether it comes from the API, the CLI or the client.

    Raises:
        HookError: A field is not valid (named, with why).
    """
    checked_url(url)
    wanted = tuple(dict.fromkeys(event.strip().upper() for event in events if event.strip()))
    unknown = [event for event in wanted if event not in HOOK_EVENTS]
    if not wanted or unknown:
        raise HookError(f"events: {', '.join(unknown) or 'none given'}: give some of {', '.join(HOOK_EVENTS)}")
    if agent and not re.fullmatch(AGENT_NAME_PATTERN, agent):
        raise HookError(f"agent: {agent[:100]!r} is not an agent name (lowercase letters, digits and '-', up to 63)")
    if not 1 <= max_attempts <= 100:
        raise HookError(f"max_attempts: {max_attempts} is not between 1 and 100")
    if not 0 < first_retry_seconds <= 3600:
        raise HookError(f"first_retry: {first_retry_seconds}s is not between 0 and 1 hour")
    return wanted


def checked_url(url: str) -> None:
    """Refuse a URL a worker could not POST to, or whose listing would show a password.

    Raises:
        HookError: It is not an http(s) URL with a host name or IP address and a port 1-65535, or
            it carries a user name or password (named ``url``, with why).
    """
    shown = repr(shown_url(url)[:100])
    if len(url) > 2000:
        raise HookError(f"url: {shown} is over 2000 characters")
    try:
        parsed = urlparse(url)
        port = parsed.port  # out of range or not a number: ValueError
    except ValueError as err:
        raise HookError(f"url: {shown} is not a valid URL ({err})") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise HookError(f"url: {shown} is not an http(s) URL")
    if parsed.username is not None or parsed.password is not None:
        # It would be stored, listed and logged with the subscription: the secret signs the POSTs.
        raise HookError(f"url: {shown} carries a user name or password; check the DSMO-Signature instead")
    if port == 0:
        raise HookError(f"url: {shown} has no usable port (1-65535)")
    if not _valid_host(parsed.hostname or ""):
        raise HookError(f"url: {shown} has no valid host (a DNS name or an IP address)")


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    labels = name.removesuffix(".").split(".")
    return len(name) <= 253 and all(HOST_LABEL.fullmatch(label) for label in labels)


class HookStore:
    """The subscriptions and failed deliveries in the object store."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    def add(
        self,
        url: str,
        events: Sequence[str],
        *,
        agent: str | None = None,
        max_attempts: int = 12,
        first_retry_seconds: float = 1.0,
    ) -> Subscription:
        """Make a subscription (its secret is in what this returns, and never shown again).

        Raises:
            HookError: A field is not valid (named).
        """
        wanted = checked(url, events, max_attempts, first_retry_seconds, agent)
        made = Subscription(
            id=f"hook-{secrets.token_hex(6)}",
            url=url,
            events=wanted,
            agent=agent or None,
            secret=f"whsec_{secrets.token_urlsafe(32)}",
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            max_attempts=max_attempts,
            first_retry_seconds=first_retry_seconds,
        )
        self.store.put_json_once(f"{SUBSCRIPTIONS}{made.id}.json", asdict(made))
        return made

    def subscriptions(self) -> list[Subscription]:
        """Every subscription, oldest first."""
        found = [self._subscription(self.store.read_json(uri)) for uri in self.store.list_uris(SUBSCRIPTIONS)]
        return sorted(found, key=lambda made: (made.created_at, made.id))

    def get(self, subscription_id: str) -> Subscription | None:
        try:
            return self._subscription(self.store.read_json(self.store.uri(f"{SUBSCRIPTIONS}{subscription_id}.json")))
        except ArtifactMissing:
            return None

    def remove(self, subscription_id: str) -> bool:
        """Remove a subscription; False if there is none by that id."""
        if self.get(subscription_id) is None:
            return False
        self.store.delete_keys([f"{SUBSCRIPTIONS}{subscription_id}.json"])
        return True

    def record_failed(self, delivery: dict[str, Any], reason: str) -> None:
        """Keep a delivery past its budget until it is redelivered."""
        record = {**delivery, "reason": reason, "failedAt": datetime.now(UTC).isoformat(timespec="seconds")}
        key = f"{FAILED}{delivery['deliveryId']}.json"
        self.store.delete_keys([key])  # a redelivery that failed again replaces the earlier record
        self.store.put_json_once(key, record)

    def failed(self) -> list[dict[str, Any]]:
        """The deliveries past their budget, oldest first."""
        found = [self.store.read_json(uri) for uri in self.store.list_uris(FAILED)]
        return sorted(found, key=lambda record: (str(record.get("failedAt")), str(record.get("deliveryId"))))

    def failed_one(self, delivery_id: str) -> dict[str, Any]:
        """A failed delivery's record.

        Raises:
            HookError: No failed delivery has this id.
        """
        try:
            record: dict[str, Any] = self.store.read_json(self.store.uri(f"{FAILED}{delivery_id}.json"))
        except ArtifactMissing:
            raise HookError(f"delivery: no failed delivery {delivery_id!r} (dsmo hooks failed lists them)") from None
        return record

    def forget_failed(self, delivery_id: str) -> None:
        """Take a failed delivery off the list (it is being delivered again)."""
        self.store.delete_keys([f"{FAILED}{delivery_id}.json"])

    @staticmethod
    def _subscription(data: dict[str, Any]) -> Subscription:
        return Subscription(**{**data, "events": tuple(data["events"])})


def body_of(delivery: dict[str, Any]) -> bytes:
    """What a POST carries: the delivery as JSON (the same bytes on every attempt)."""
    return json.dumps(delivery, sort_keys=True, separators=(",", ":")).encode()
