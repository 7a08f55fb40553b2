"""The activities' errors, and how the permanent ones become non-retryable Temporal failures."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from temporalio.exceptions import ApplicationError

from dsmo.activities.artifacts import ArtifactError, ArtifactMissing
from dsmo.activities.subject_keys import SubjectErased, SubjectKeysMissing
from dsmo.workflows.common import errors as failure_types
from dsmo.workflows.common.errors import DsmoError


class UnknownAgent(DsmoError):
    """A `run_agent` node names an agent (or a version) no plugin on this worker registered."""

    code = "unknown_agent"


class InvalidInput(DsmoError):
    """The input is not what the processor or action accepts (permanent: retrying won't help)."""

    code = "invalid_input"


class PluginError(DsmoError):
    """A plugin that cannot be loaded: the message names it and the reason, in one line."""

    code = "plugin_error"


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
# (the names are the workflow's, in workflows/common/errors.py).
PERMANENT: tuple[tuple[type[DsmoError], str], ...] = (
    (ContractViolation, failure_types.CONTRACT_VIOLATION),
    (UnknownAgent, failure_types.UNKNOWN_AGENT),
    (ArtifactMissing, failure_types.MISSING_ARTIFACT),
    # Erased data stays erased, and a missing key-encryption key is configuration: no retry helps.
    (SubjectErased, failure_types.MISSING_ARTIFACT),
    (SubjectKeysMissing, failure_types.INVALID_INPUT),
    (InvalidInput, failure_types.INVALID_INPUT),
    (ArtifactError, failure_types.INVALID_INPUT),
    (ActionRefused, failure_types.ACTION_REFUSED),
    (UnknownAction, failure_types.UNKNOWN_ACTION),
)

P = ParamSpec("P")
R = TypeVar("R")


def permanent_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Raise known permanent errors as non-retryable ApplicationErrors; let the rest retry.

    Works on plain and ``async def`` activities alike.
    """
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                return await fn(*args, **kwargs)
            except DsmoError as err:
                failure = _permanent_failure(err)
                if failure is None:
                    raise
                raise failure from err

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DsmoError as err:
            failure = _permanent_failure(err)
            if failure is None:
                raise
            raise failure from err

    return wrapper


def _permanent_failure(err: DsmoError) -> ApplicationError | None:
    for cls, type_name in PERMANENT:
        if isinstance(err, cls):
            return ApplicationError(str(err), type=type_name, non_retryable=True)
    return None
