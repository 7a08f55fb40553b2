"""How runs reach people: the default channel, the file channel's outbox, the webhook."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dsmo.config.env_values import EnvReader, SettingsError, on_off
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN


@dataclass(frozen=True)
class MessagingSettings:
    """The default channel of messages and requests, and the settings of the two built-in ones.

    Attributes:
        channel: The default channel: ``file``, ``webhook`` or a plugin's [``DSMO_CHANNEL``].
        outbox_dir_override: Where the ``file`` channel writes messages, when not under the state
            folder [``DSMO_OUTBOX_DIR``].
        log_content: Log message text, not only who got a message and its length [``DSMO_LOG_CONTENT``].
        webhook_url: The ``webhook`` channel's endpoint [``DSMO_WEBHOOK_URL``].
        webhook_token: Its bearer token [``DSMO_WEBHOOK_TOKEN``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        "DSMO_CHANNEL": "file",
        "DSMO_OUTBOX_DIR": "",
        # Message and event text in the worker's log (on for debugging only; off logs metadata).
        "DSMO_LOG_CONTENT": "off",
        "DSMO_WEBHOOK_URL": "",
        "DSMO_WEBHOOK_TOKEN": "",
    }

    channel: str = "file"
    outbox_dir_override: str = ""
    log_content: bool = False
    webhook_url: str = ""
    webhook_token: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MessagingSettings:
        """Read and check this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.

        Raises:
            SettingsError: A value is invalid, or the webhook channel has no URL.
        """
        read = EnvReader(env, cls.VARIABLES)
        settings = cls(
            channel=read.text("DSMO_CHANNEL"),
            outbox_dir_override=read.text("DSMO_OUTBOX_DIR"),
            log_content=read.switch("DSMO_LOG_CONTENT"),
            webhook_url=read.text("DSMO_WEBHOOK_URL"),
            webhook_token=read.text("DSMO_WEBHOOK_TOKEN"),
        )
        if not re.fullmatch(AGENT_NAME_PATTERN, settings.channel):
            raise SettingsError(f"DSMO_CHANNEL: {settings.channel!r} is not a channel name")
        if settings.channel == "webhook" and not settings.webhook_url:
            raise SettingsError("DSMO_WEBHOOK_URL: required when DSMO_CHANNEL=webhook")
        return settings

    def to_env(self) -> dict[str, str]:
        """The variables that make another process read these settings.

        Returns:
            Variable names and values.
        """
        return {
            "DSMO_CHANNEL": self.channel,
            "DSMO_OUTBOX_DIR": self.outbox_dir_override,
            "DSMO_LOG_CONTENT": on_off(self.log_content),
            "DSMO_WEBHOOK_URL": self.webhook_url,
            "DSMO_WEBHOOK_TOKEN": self.webhook_token,
        }
