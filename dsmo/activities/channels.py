"""DSMO's own channels, registered like any plugin's: the file outbox, and a webhook when configured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsmo.activities.messaging import FileChannel, WebhookChannel
from dsmo.activities.plugins import channel

if TYPE_CHECKING:
    from dsmo.config.settings import Settings


@channel("file")
def file_channel(settings: Settings) -> FileChannel:
    """One JSON file per message in the outbox folder (``DSMO_OUTBOX_DIR``)."""
    return FileChannel(settings.outbox_dir, log_content=settings.messaging.log_content)


@channel("webhook")
def webhook_channel(settings: Settings) -> WebhookChannel | None:
    """POSTs to ``DSMO_WEBHOOK_URL``; not offered when it is unset."""
    if not settings.messaging.webhook_url:
        return None
    return WebhookChannel(settings.messaging.webhook_url, token=settings.messaging.webhook_token or None)
