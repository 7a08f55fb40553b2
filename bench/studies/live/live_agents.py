"""The live-stream study's agents: each works a moment and reports its progress as it goes.

Loaded into the study's worker process with ``DSMO_LOAD=bench.studies.live.live_agents``; only
the worker imports this module (importing it registers the agents in the process). Each report
carries ``sent`` (the worker's wall clock, seconds) so the bench can tell how long a progress item
took to reach a reader.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import dsmo

READ, CHECK, VERSION = "bench-live-read", "bench-live-check", "1.0.0"
STEP_SECONDS = 0.25  # the agents' work between two reports
READ_STEPS, CHECK_STEPS = 4, 2


async def _work(step: str, steps: int) -> None:
    for page in range(1, steps + 1):
        dsmo.progress(step=step, page=page, of=steps, sent=time.time())
        await asyncio.sleep(STEP_SECONDS)


@dsmo.agent(READ, version=VERSION)
async def read(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Reads the document in ``READ_STEPS`` steps, reporting each."""
    await _work("reading", READ_STEPS)
    return {"pages": READ_STEPS}, {"pages": READ_STEPS}


@dsmo.agent(CHECK, version=VERSION)
async def check(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Checks what was read in ``CHECK_STEPS`` steps, reporting each."""
    await _work("checking", CHECK_STEPS)
    return {"checked": CHECK_STEPS}, {"checked": CHECK_STEPS}
