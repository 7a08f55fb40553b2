"""The what-if section's counting agent: every call is one line in a file the bench reads.

Loaded into the section's worker process with `DSMO_LOAD=bench.studies.what_if.what_if_agents`; the file is
named by ``DSMO_BENCH_CALLS_FILE``. Each line is the run id of the call, so the bench can tell
the corpus's own calls from any a replay made (a replay's id carries ``.whatif-``). Only the
worker imports this module: importing it registers the agent in the process.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import dsmo
from bench.studies.what_if.what_if_measures import AGENT, CALLS_FILE, VERSION

_lock = threading.Lock()


@dsmo.agent(AGENT, version=VERSION)
def profile(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Profiles the applicant (a fixed answer) and counts the call."""
    with _lock, open(os.environ[CALLS_FILE], "a", encoding="utf-8") as calls:
        calls.write(message.run_id + "\n")
    return {"profiled": True}, {"profiled": True}
