"""The one definition of DSMO's identifiers, shared by the CLI, the client, the ingress, the
definition store and the workflow.

Run ids, agent names and workflow versions become parts of object keys
(`artifacts/{version}/{run_id}/...`, `configs/{version}.json`), so each is checked with a
full-string match: no trailing newline (``$`` in a regular expression would let one through),
no NUL, no path or query characters. Event ids are an outside system's dedup keys: any
printable text, bounded.
"""

from __future__ import annotations

import re
from typing import Any

from dsmo.workflows.common.errors import DsmoError

# Patterns without anchors, for pydantic fields and OpenAPI (wrap them in ^...$ there).
RUN_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}"
AGENT_NAME_PATTERN = r"[a-z0-9][a-z0-9-]{0,62}"
WORKFLOW_VERSION_PATTERN = r"[0-9a-f]{12}"
MAX_EVENT_ID = 200

_RUN_ID = re.compile(RUN_ID_PATTERN)
_AGENT_NAME = re.compile(AGENT_NAME_PATTERN)
_WORKFLOW_VERSION = re.compile(WORKFLOW_VERSION_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# The suffixes DSMO itself adds to a run id to name a run derived from it (see derived_run_id).
_DERIVED_SUFFIXES = re.compile(r"(\.(?:fork|replay|whatif)-[0-9a-f]{8})+$")
_MAX_RUN_ID = 200


class InvalidIdentifier(DsmoError):
    """An identifier that does not follow its rule; the message names it and the rule."""

    code = "invalid_identifier"


class InvalidRunId(InvalidIdentifier):
    """A run id that does not follow the rule."""

    code = "invalid_run_id"


def _shown(value: Any) -> str:
    return repr(value if isinstance(value, str) else str(value))[:66]


def run_id_problem(run_id: Any) -> str | None:
    """Why ``run_id`` is not a run id, or None if it is one."""
    if isinstance(run_id, str) and _RUN_ID.fullmatch(run_id) and ".." not in run_id:
        return None
    return (
        f"run id {_shown(run_id)}: use 1-200 letters, digits, '.', '_', ':' or '-', starting with a letter or "
        "digit, and no '..'"
    )


def agent_name_problem(agent: Any) -> str | None:
    """Why ``agent`` is not an agent name, or None if it is one."""
    if isinstance(agent, str) and _AGENT_NAME.fullmatch(agent):
        return None
    return f"agent {_shown(agent)}: not an agent name (a-z, 0-9 and '-', up to 63)"


def workflow_version_problem(version: Any) -> str | None:
    """Why ``version`` is not a workflow version, or None if it is one."""
    if isinstance(version, str) and _WORKFLOW_VERSION.fullmatch(version):
        return None
    return f"version {_shown(version)}: not a workflow_version (12 hexadecimal digits)"


def event_id_problem(event_id: Any) -> str | None:
    """Why ``event_id`` is not an event id, or None if it is one."""
    if (
        isinstance(event_id, str)
        and 0 < len(event_id) <= MAX_EVENT_ID
        and not _CONTROL.search(event_id)
        and event_id == event_id.strip()
    ):
        return None
    return (
        f"event_id {_shown(event_id)[:42]}: use 1-{MAX_EVENT_ID} printable characters, without control "
        "characters or surrounding blanks"
    )


def check_run_id(run_id: Any) -> None:
    """Raise InvalidRunId unless ``run_id`` is a run id."""
    problem = run_id_problem(run_id)
    if problem:
        raise InvalidRunId(problem)


def derived_run_id(run_id: str, kind: str, token: str) -> str:
    """The default id of a run DSMO derives from ``run_id``: ``<root>.<kind>-<token>``.

    The root is ``run_id`` without the suffixes DSMO added before, so a fork of a fork of a fork
    stays as short as the first fork (its lineage is in the run's origin, not in its id); a root
    too long to take the suffix is cut, never the suffix.

    Args:
        run_id: The run the new one comes from (already a valid run id).
        kind: ``fork``, ``replay`` or ``whatif``.
        token: Eight hexadecimal digits that make the new id unique.
    """
    suffix = f".{kind}-{token}"
    root = _DERIVED_SUFFIXES.sub("", run_id) or run_id
    return root[: _MAX_RUN_ID - len(suffix)].rstrip(".") + suffix
