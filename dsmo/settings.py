"""DSMO's settings, in one namespace: `from dsmo.settings import Settings`.

`Settings.from_env()` reads every ``DSMO_*`` variable once and checks it (a bad value is a
`SettingsError` naming the variable); each group holds one concern's variables.
"""

from __future__ import annotations

from dsmo.config.codec_settings import CodecSettings
from dsmo.config.ingress_settings import IngressSettings
from dsmo.config.llm_settings import LlmSettings
from dsmo.config.messaging_settings import MessagingSettings
from dsmo.config.settings import Settings, SettingsError
from dsmo.config.store_settings import StoreSettings
from dsmo.config.temporal_settings import TemporalSettings
from dsmo.config.worker_settings import WorkerSettings

__all__ = [
    "CodecSettings",
    "IngressSettings",
    "LlmSettings",
    "MessagingSettings",
    "Settings",
    "SettingsError",
    "StoreSettings",
    "TemporalSettings",
    "WorkerSettings",
]
