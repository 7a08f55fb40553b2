"""Outgoing messages and requests (documents, signatures, tests) through pluggable channels.

A channel is anything with `send(message)` and, to carry requests, `request(request)`;
plugins register a factory for one by name (`dsmo.channel`). Two ship with DSMO: the file
channel (default: one JSON file per message in an outbox folder, written whole and exclusively,
so a retried activity sends once) and a webhook channel that POSTs JSON to a URL with an
`Idempotency-Key` header.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from temporalio import activity

from dsmo.activities.plugin_errors import InvalidInput, PluginError, permanent_errors
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.activity_io import (
    SEND_MESSAGE,
    SEND_REQUEST,
    RequestReceipt,
    SendMessageRequest,
    SendRequest,
    SentMessage,
)

if TYPE_CHECKING:
    from dsmo.config.settings import Settings

log = logging.getLogger("dsmo.messaging")


class ChannelError(DsmoError):
    """A channel could not deliver (transient: the activity retries)."""

    code = "channel_error"


class Channel(Protocol):
    """A way to reach people: deliver each message (and request) once per ``idempotency_key``.

    ``send`` may return a `SentMessage` receipt or ``None`` (the key is then the message id).
    A channel that also carries document, signature and test requests has
    ``request(request) -> RequestReceipt | None`` too. Raise `InvalidInput` for a message the
    channel can never deliver (not retried); any other error is retried.
    """

    def send(self, message: SendMessageRequest) -> SentMessage | None:
        """Deliver ``message`` once per ``message.idempotency_key``.

        Args:
            message: The run, node, recipient, text and idempotency key.

        Returns:
            A receipt, or None to let DSMO use the idempotency key as the message id.
        """
        ...


ChannelFactory = Callable[["Settings"], "Channel | None"]


class ChannelRegistry:
    """Channel factories by name; a worker builds its channels from them with its settings."""

    def __init__(self) -> None:
        self._factories: dict[str, ChannelFactory] = {}

    def add(self, name: str, factory: ChannelFactory) -> None:
        """Register ``factory`` as channel ``name``; the same factory again is harmless.

        Raises:
            PluginError: Another factory is registered under ``name``.
        """
        known = self._factories.get(name)
        if known is not None and known is not factory:
            raise PluginError(f"channel {name} is registered twice")
        self._factories[name] = factory

    def names(self) -> list[str]:
        """Registered channel names, sorted."""
        return sorted(self._factories)

    def build(self, settings: Settings) -> dict[str, Channel]:
        """The configured channels: each factory's, unless it returned None."""
        channels: dict[str, Channel] = {}
        for name, factory in sorted(self._factories.items()):
            made = factory(settings)
            if made is not None:
                channels[name] = made
        return channels


class FileChannel:
    """Writes ``{outbox}/{run_id}/{idempotency_key}.json`` whole and exclusively: sent once.

    The log says who got a message and how long it was; its text only with ``log_content``
    (``DSMO_LOG_CONTENT=on``), since messages carry what people wrote.
    """

    name = "file"

    def __init__(self, outbox: Path, *, log_content: bool = False) -> None:
        self.outbox = outbox
        self.log_content = log_content

    def send(self, message: SendMessageRequest) -> SentMessage:
        created = self._write(
            message.run_id, message.idempotency_key, {"kind": "message", **message.model_dump(mode="json")}
        )
        if created:
            to, run, node = message.to or "-", message.run_id, message.node
            if self.log_content:
                log.info("message to %s from %s (%s): %s", to, run, node, message.message)
            else:
                log.info("message to %s from %s (%s): %d characters", to, run, node, len(message.message))
        return SentMessage(message_id=message.idempotency_key, channel=self.name, duplicate=not created)

    def request(self, request: SendRequest) -> RequestReceipt:
        created = self._write(request.run_id, request.idempotency_key, request.model_dump(mode="json"))
        if created:
            log.info("%s request to %s from %s (%s)", request.kind, request.to or "-", request.run_id, request.node)
        return RequestReceipt(request_id=request.idempotency_key, channel=self.name, duplicate=not created)

    def _write(self, run_id: str, key: str, record: dict[str, Any]) -> bool:
        folder = self.outbox / run_id
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{key}.json"
        # Written in full to a private file first, then linked into place: the message file
        # appears complete or not at all, so a crash mid-write cannot leave a file that a
        # retry takes as sent. `link` (unlike `rename`) refuses an existing name: sent once.
        fd, scratch = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump({**record, "sentAt": datetime.now(UTC).isoformat()}, handle, ensure_ascii=False, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(scratch, 0o644)
            try:
                os.link(scratch, target)
            except FileExistsError:
                if _complete(target):
                    return False
                # Left half-written by an older DSMO that crashed mid-write: never sent.
                os.replace(scratch, target)
            return True
        finally:
            Path(scratch).unlink(missing_ok=True)


def _complete(path: Path) -> bool:
    """Whether ``path`` holds a whole message record (an empty or cut-off file does not)."""
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def remove_outbox_messages(outbox: Path, run_ids: list[str]) -> int:
    """Remove the file channel's messages of these runs (``{outbox}/{run_id}/``); how many runs had any.

    Only folders directly in ``outbox`` named exactly as a run: a run id is a single path segment.
    """
    removed = 0
    for run_id in run_ids:
        folder = outbox / run_id
        if "/" in run_id or run_id in ("", ".", "..") or folder.parent != outbox or not folder.is_dir():
            continue
        shutil.rmtree(folder)
        removed += 1
    return removed


class WebhookChannel:
    """POSTs each message or request as JSON; the receiver deduplicates by `Idempotency-Key`."""

    name = "webhook"

    def __init__(self, url: str, *, timeout: float = 10.0, token: str | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.token = token

    def send(self, message: SendMessageRequest) -> SentMessage:
        self._post({"kind": "message", **message.model_dump(mode="json")}, message.idempotency_key)
        return SentMessage(message_id=message.idempotency_key, channel=self.name)

    def request(self, request: SendRequest) -> RequestReceipt:
        self._post(request.model_dump(mode="json"), request.idempotency_key)
        return RequestReceipt(request_id=request.idempotency_key, channel=self.name)

    def _post(self, body: dict[str, Any], key: str) -> None:
        headers = {"Content-Type": "application/json", "Idempotency-Key": key, "User-Agent": "dsmo-webhook/1"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body, ensure_ascii=False).encode()
        post = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(post, timeout=self.timeout) as response:
                response.read()
        except urllib.error.HTTPError as err:
            if 400 <= err.code < 500 and err.code not in (408, 409, 429):
                raise InvalidInput(
                    f"webhook {self.url} refused the {body.get('kind')} ({err.code} {err.reason})"
                ) from None
            raise ChannelError(f"webhook {self.url} answered {err.code} {err.reason}") from None
        except (OSError, ValueError) as err:
            raise ChannelError(f"webhook {self.url} unreachable: {err}") from None


class MessagingActivities:
    def __init__(self, channels: dict[str, Channel], default: str = "file") -> None:
        if default not in channels:
            raise ValueError(f"DSMO_CHANNEL: {default!r} is not configured (configured: {', '.join(channels)})")
        self.channels = channels
        self.default = default

    def _channel(self, name: str | None) -> tuple[str, Channel]:
        chosen = name or self.default
        if chosen not in self.channels:
            raise InvalidInput(
                f"channel {chosen!r} is not configured on this worker (configured: {', '.join(self.channels)})"
            )
        return chosen, self.channels[chosen]

    @activity.defn(name=SEND_MESSAGE)
    @permanent_errors
    def send_message(self, message: SendMessageRequest) -> SentMessage:
        name, channel = self._channel(message.channel)
        receipt = channel.send(message)
        return receipt if receipt is not None else SentMessage(message_id=message.idempotency_key, channel=name)

    @activity.defn(name=SEND_REQUEST)
    @permanent_errors
    def send_request(self, request: SendRequest) -> RequestReceipt:
        name, channel = self._channel(request.channel)
        deliver = getattr(channel, "request", None)
        if deliver is None:
            raise InvalidInput(f"channel {name!r} sends messages only, not {request.kind} requests")
        receipt = deliver(request)
        return receipt if receipt is not None else RequestReceipt(request_id=request.idempotency_key, channel=name)
