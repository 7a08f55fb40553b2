"""How long a definition's ended runs keep their data, and their audit trail.

``retention: {ended: 180d, trail: 7y}``: 180 days after a run ends, its stored objects (input,
outputs, model call records, dead letters, large event values) and its Temporal history are
removed; seven years after it ends, its audit trail is. A period left out takes the deployment's
default (``DSMO_RETENTION_ENDED``, ``DSMO_RETENTION_TRAIL``); none anywhere means kept.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import model_validator

from dsmo.workflows.common.durations import LongDuration
from dsmo.workflows.common.wire import CamelModel

# A sweep runs hourly by default: a shorter period would not be kept to.
MIN_RETENTION = timedelta(hours=1)


class Retention(CamelModel):
    """How long ended runs keep their data.

    Attributes:
        ended: After a run ends, how long its stored objects and Temporal history are kept.
        trail: After a run ends, how long its audit trail is kept (at least ``ended``).
    """

    ended: LongDuration | None = None
    trail: LongDuration | None = None

    @model_validator(mode="after")
    def _check(self) -> Retention:
        for name, period in (("ended", self.ended), ("trail", self.trail)):
            if period is not None and period < MIN_RETENTION:
                raise ValueError(f"{name}: at least 1h (the sweep runs hourly)")
        if self.ended is not None and self.trail is not None and self.trail < self.ended:
            raise ValueError("trail: at least as long as ended (a trail outlives the data it describes)")
        return self

    def merged(self, defaults: Retention) -> Retention:
        """This policy with each period it leaves out taken from ``defaults``.

        A trail never goes before the data it describes: a definition's short ``trail`` beside a
        default ``ended`` longer than it keeps the trail as long as the data.
        """
        ended, trail = self.ended or defaults.ended, self.trail or defaults.trail
        if ended is not None and trail is not None and trail < ended:
            trail = ended
        return Retention(ended=ended, trail=trail)
