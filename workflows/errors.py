"""The project's error hierarchy: one base class, one subclass per condition.

Every message names the field or object at fault and the reason, on one line, so the CLI
can print it as is.
"""

from __future__ import annotations


class DsmoError(Exception):
    """Base of every error DSMO raises on purpose."""

    code = "dsmo_error"


class DefinitionError(DsmoError):
    """An agent definition that cannot be used."""

    code = "invalid_definition"

    def __init__(self, field: str, reason: str, *, source: str | None = None) -> None:
        self.field = field
        self.reason = reason
        self.source = source
        prefix = f"{source}: " if source else ""
        where = f"{field}: " if field else ""
        super().__init__(f"{prefix}{where}{reason}")


class TemplateError(DsmoError):
    """A template that refers to a variable the run does not have."""

    code = "template_error"


class IllegalTransition(DsmoError):
    """A status change the state machine does not allow."""

    code = "illegal_transition"
