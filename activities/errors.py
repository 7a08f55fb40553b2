"""Turns the project's permanent errors into non-retryable Temporal failures, by type name."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from temporalio.exceptions import ApplicationError

from dsmo.activities.artifacts import ArtifactError, ArtifactMissing
from dsmo.activities.processors import InvalidInput, UnknownAgent
from dsmo.workflows import errors as failure_types
from dsmo.workflows.errors import DsmoError


class ContractViolation(DsmoError):
    """A processor broke the stage contract (summary too large, output not a JSON object...)."""

    code = "contract_violation"


class UnknownAction(DsmoError):
    """A saga action or compensation no registered action answers to."""

    code = "unknown_action"


class ActionRefused(DsmoError):
    """The action cannot be done with this input (a declined card, no stock): not retried."""

    code = "action_refused"


# Checked in order: the first matching class names the failure type the workflow sees
# (the names are the workflow's, in workflows/errors.py).
PERMANENT: tuple[tuple[type[DsmoError], str], ...] = (
    (ContractViolation, failure_types.CONTRACT_VIOLATION),
    (UnknownAgent, failure_types.UNKNOWN_AGENT),
    (ArtifactMissing, failure_types.MISSING_ARTIFACT),
    (InvalidInput, failure_types.INVALID_INPUT),
    (ArtifactError, failure_types.INVALID_INPUT),
    (ActionRefused, failure_types.ACTION_REFUSED),
    (UnknownAction, failure_types.UNKNOWN_ACTION),
)

P = ParamSpec("P")
R = TypeVar("R")


def permanent_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Raise known permanent errors as non-retryable ApplicationErrors; let the rest retry."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DsmoError as err:
            for cls, type_name in PERMANENT:
                if isinstance(err, cls):
                    raise ApplicationError(str(err), type=type_name, non_retryable=True) from err
            raise

    return wrapper
