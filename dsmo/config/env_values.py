"""Reading one environment variable and checking its value, for every settings group.

A bad value is a `SettingsError` whose one-line message names the variable and the reason
(``DSMO_UI_PORT: 'ui' is not a port number``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from dsmo.workflows.common.durations import parse_duration

_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


class SettingsError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


class EnvReader:
    """One settings group's view of the environment: a variable unset or empty takes its default.

    Args:
        env: The environment to read.
        defaults: The group's variables and their defaults; only these may be read.
    """

    def __init__(self, env: Mapping[str, str], defaults: Mapping[str, str]) -> None:
        self._env = env
        self._defaults = defaults

    def text(self, name: str) -> str:
        """The variable's value, or its default.

        Args:
            name: The variable.

        Returns:
            The value as given.
        """
        return self._env.get(name) or self._defaults[name]

    def port(self, name: str) -> int:
        """The variable as a TCP port.

        Args:
            name: The variable.

        Returns:
            The port, 1-65535.

        Raises:
            SettingsError: It is not a port number.
        """
        return port_number(self.text(name), name)

    def whole_number(self, name: str, *, at_least: int = 0) -> int:
        """The variable as a whole number; a smaller one than ``at_least`` is raised to it.

        Args:
            name: The variable.
            at_least: The floor the value is raised to (a negative value is refused, not raised).

        Returns:
            The number.

        Raises:
            SettingsError: It is not a whole number, or it is negative.
        """
        value = self.text(name)
        try:
            number = int(value)
        except ValueError:
            raise SettingsError(f"{name}: {value!r} is not a whole number") from None
        if number < 0:
            raise SettingsError(f"{name}: {number} is negative")
        return max(at_least, number)

    def positive_number(self, name: str) -> float:
        """The variable as a finite number above zero.

        Args:
            name: The variable.

        Returns:
            The number.

        Raises:
            SettingsError: It is not a number, or not a finite positive one.
        """
        value = self.text(name)
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"{name}: {value!r} is not a number") from None
        if not number > 0 or number == float("inf"):
            raise SettingsError(f"{name}: {value!r} is not a positive number")
        return number

    def switch(self, name: str) -> bool:
        """The variable as on or off (also 1/0, true/false, yes/no).

        Args:
            name: The variable.

        Returns:
            True for on.

        Raises:
            SettingsError: It is neither on nor off.
        """
        value = self.text(name).strip().lower()
        if value not in _SWITCH:
            raise SettingsError(f"{name}: {value!r} is not on or off")
        return _SWITCH[value]

    def one_of(self, name: str, choices: tuple[str, ...]) -> str:
        """The variable as one of ``choices`` (case-insensitive).

        Args:
            name: The variable.
            choices: The values it may take, lower case.

        Returns:
            The value, lower case.

        Raises:
            SettingsError: It is none of them.
        """
        value = self.text(name).strip().lower()
        if value not in choices:
            raise SettingsError(f"{name}: {value!r} is not one of {', '.join(choices)}")
        return value


def port_number(value: str, name: str) -> int:
    """Check a TCP port given as text.

    Args:
        value: The text.
        name: The variable it came from, for the message.

    Returns:
        The port, 1-65535.

    Raises:
        SettingsError: It is not a number in that range.
    """
    try:
        port = int(value)
    except ValueError:
        raise SettingsError(f"{name}: {value!r} is not a port number") from None
    if not 0 < port < 65536:
        raise SettingsError(f"{name}: {port} is outside 1-65535")
    return port


def duration_value(value: str, name: str, *, at_least: timedelta, shortest: str) -> timedelta:
    """Check a duration given as text (``30s``, ``15m``, ``7d``, ``7y``).

    Args:
        value: The text.
        name: The variable it came from, for the message.
        at_least: The shortest it may be.
        shortest: ``at_least`` as the message says it (``1m``, ``1d``).

    Returns:
        The duration.

    Raises:
        SettingsError: It is not a duration, or is shorter than ``at_least``.
    """
    try:
        period = parse_duration(value, years=True)
    except ValueError as err:
        raise SettingsError(f"{name}: {err}") from None
    if period < at_least:
        raise SettingsError(f"{name}: at least {shortest}")
    return period


def on_off(value: bool) -> str:
    """A switch as the environment spells it.

    Args:
        value: The switch.

    Returns:
        ``on`` or ``off``.
    """
    return "on" if value else "off"
