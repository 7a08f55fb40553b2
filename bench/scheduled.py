"""B3's end, read from its audit trail: when the run ended and with which output, as DSMO recorded it.

B3's lineage is not read from the trail: like every mode's, it comes from what each execution
read and wrote (`bench.shared_rule.link_by_artifacts`). The trail only says when the run ended
(`RUN_COMPLETED` or `RUN_ABORTED`) and the last output it committed, as the queue's ``ends``
table says them for B1 and B2.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

ENDINGS = ("RUN_COMPLETED", "RUN_ABORTED")


def trail_end(trail: Sequence[dict[str, Any]]) -> float | None:
    """When the run ended (a Unix time), from its exported trail; None if it has not."""
    ended = None
    for event in sorted(trail, key=lambda e: int(e.get("seq", 0))):
        if event.get("type") in ENDINGS:
            ended = datetime.fromisoformat(str(event["at"]).replace("Z", "+00:00")).timestamp()
    return ended


def trail_result(trail: Sequence[dict[str, Any]]) -> str | None:
    """The artifact of the last stage output the run committed (`STAGE_SUCCEEDED`), if any."""
    found = None
    for event in sorted(trail, key=lambda e: int(e.get("seq", 0))):
        uris = event.get("artifactUris") or []
        if event.get("type") == "STAGE_SUCCEEDED" and uris:
            found = str(uris[-1])
    return found
