"""The keys that encrypt payloads on their way to Temporal (the payload codec)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dsmo.starter.config.env_values import EnvReader


@dataclass(frozen=True)
class CodecSettings:
    """Payload encryption keys, given inline or in a file; none means payloads in clear.

    The payload codec parses and checks the keys where it is built, so a process that reads only
    these two variables (the codec server) checks them the same way.

    Attributes:
        keys: Payload encryption keys, ``id:base64`` comma-separated [``DSMO_CODEC_KEYS``].
        keys_file: The same keys read from a file [``DSMO_CODEC_KEYS_FILE``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {"DSMO_CODEC_KEYS": "", "DSMO_CODEC_KEYS_FILE": ""}

    keys: str = ""
    keys_file: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CodecSettings:
        """Read this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.
        """
        read = EnvReader(env, cls.VARIABLES)
        return cls(keys=read.text("DSMO_CODEC_KEYS"), keys_file=read.text("DSMO_CODEC_KEYS_FILE"))

    def to_env(self) -> dict[str, str]:
        """The variables that make another process (or the codec alone) read these settings.

        Returns:
            ``DSMO_CODEC_KEYS`` and ``DSMO_CODEC_KEYS_FILE`` with their values.
        """
        return {"DSMO_CODEC_KEYS": self.keys, "DSMO_CODEC_KEYS_FILE": self.keys_file}
