"""Outgoing messages through a pluggable channel; the default writes one JSON file per message."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from temporalio import activity

from workflows.contracts import SEND_MESSAGE, SendMessageRequest, SentMessage

log = logging.getLogger("dsmo.messaging")


class Channel(Protocol):
    name: str

    def send(self, request: SendMessageRequest) -> SentMessage: ...


class FileChannel:
    """Writes ``{outbox}/{run_id}/{idempotency_key}.json``, created exclusively: sent once."""

    name = "file"

    def __init__(self, outbox: Path) -> None:
        self.outbox = outbox

    def send(self, request: SendMessageRequest) -> SentMessage:
        folder = self.outbox / request.run_id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{request.idempotency_key}.json"
        record = {**request.model_dump(mode="json"), "sentAt": datetime.now(UTC).isoformat()}
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return SentMessage(message_id=request.idempotency_key, channel=self.name, duplicate=True)
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, ensure_ascii=False, indent=2)
        log.info("message to %s from run %s (%s): %s", request.to or "-", request.run_id, request.node, request.message)
        return SentMessage(message_id=request.idempotency_key, channel=self.name)


class MessagingActivities:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    @activity.defn(name=SEND_MESSAGE)
    def send_message(self, request: SendMessageRequest) -> SentMessage:
        return self.channel.send(request)
