"""The loop's tool as a user's plugin: a worker process started with
``DSMO_LOAD=tests.loop_tool_plugin`` serves it (tests/integration/replay/test_replay_loops.py)."""

from __future__ import annotations

import dsmo
from tests.loop_tools import NAME, VERSION, look_up

dsmo.agent(NAME, version=VERSION)(look_up)
