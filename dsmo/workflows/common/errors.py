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


# The failure types the workflow tells apart, by the name an activity's ApplicationError carries.
# Activities raise them (activities/plugin_errors.py maps their exceptions onto these names); the
# orchestrator's retry policies and stage failure policy read them. One list, so the two agree.
CONTRACT_VIOLATION = "ContractViolation"
INVALID_INPUT = "InvalidInput"
UNKNOWN_AGENT = "UnknownAgent"
MISSING_ARTIFACT = "MissingArtifact"
ACTION_REFUSED = "ActionRefused"
UNKNOWN_ACTION = "UnknownAction"

# A stage attempt failing with one of these is not tried again (a contract violation has its own route).
STAGE_PERMANENT = frozenset({INVALID_INPUT, UNKNOWN_AGENT, MISSING_ARTIFACT})
# Messages, requests and definition look-ups: no retry helps with these.
MESSAGING_PERMANENT = (CONTRACT_VIOLATION, INVALID_INPUT, UNKNOWN_AGENT, MISSING_ARTIFACT)
# A saga action: refused or unknown actions and bad input are final.
ACTION_PERMANENT = (INVALID_INPUT, ACTION_REFUSED, UNKNOWN_ACTION, CONTRACT_VIOLATION)
