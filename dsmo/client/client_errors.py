"""The client's errors: each a `DsmoError` with a one-line message and a stable ``code``.

The ingress turns ``code`` into its problem type, so a code, once published, keeps its meaning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsmo.workflows.common.errors import DsmoError

if TYPE_CHECKING:
    from dsmo.workflows.events.resume_events import EventRejected


class RunNotFound(DsmoError):
    """No run has this id."""

    code = "run_not_found"


class RunAlreadyExists(DsmoError):
    """A run with this id exists or existed: run ids are never reused."""

    code = "run_exists"


class RunClosed(DsmoError):
    """The run has ended; it takes no more events or cancellation."""

    code = "run_closed"


class EventNotAccepted(DsmoError):
    """The run refused the event (wrong kind, not waiting, bad payload); nothing was recorded."""

    code = "event_rejected"


class EventMalformed(EventNotAccepted):
    """The event is not well formed; it was refused before it was sent, so no run saw it.

    Attributes:
        problem: What `well_formed` said: the field at fault (``problem.field``) and why
            (``problem.reason``); ``str(problem)`` is the run's own one-line answer.
    """

    def __init__(self, message: str, problem: EventRejected) -> None:
        super().__init__(message)
        self.problem = problem


class RunNotStarted(DsmoError):
    """The run could not be started."""

    code = "run_not_started"


class TemporalUnavailable(DsmoError):
    """The Temporal frontend cannot be reached."""

    code = "temporal_unavailable"


class InvalidInputDocument(DsmoError):
    """A run input deeper or larger than its limits."""

    code = "invalid_input"


class WorkflowTaskFailing(DsmoError):
    """The run's workflow task keeps failing: it cannot move until the cause is fixed."""

    code = "workflow_task_failing"


class NoWorker(DsmoError):
    """No worker polls the run's task queue, so the run cannot answer or move."""

    code = "no_worker"


class DefinitionNotFound(DsmoError):
    """No definition is published under this agent name (or no such version of it)."""

    code = "definition_not_found"


class NotOffered(DsmoError):
    """A definition names agents or actions no worker polling its task queue offers; the message names them."""

    code = "not_offered"


class MigrationNotAccepted(DsmoError):
    """A run refused to move to the version asked for; the message names the reason, in one line.

    Nothing was written to the run's history (its validator refused), unless the run was
    inside a node and the node it reached cannot move (then the refusal is in its history).
    """

    code = "migration_refused"


class AlreadyOnTarget(MigrationNotAccepted):
    """The run already follows the target version: nothing to move (a re-run of a batch finds this)."""

    code = "already_on_target"


class KeyBusy(DsmoError):
    """A start was refused: its concurrency key is busy and the key says ``onBusy: reject``.

    Attributes:
        active_runs: The runs holding the key's slots.
    """

    code = "key_busy"

    def __init__(self, message: str, *, active_runs: list[str]) -> None:
        super().__init__(message)
        self.active_runs = active_runs


class FlowControlBusy(DsmoError):
    """A key's lock or debouncer did not take a start for several seconds (a burst on one key); try again."""

    code = "flow_control_busy"


class RewindNotAccepted(DsmoError):
    """A run refused to go back to the node asked for; the message names the reason, in one line.

    Nothing was written to the run's history or trail (its validator, or the client before it, refused).
    """

    code = "rewind_refused"


class InvalidQuery(DsmoError):
    """Temporal refused a visibility filter; the message says why."""

    code = "invalid_query"
