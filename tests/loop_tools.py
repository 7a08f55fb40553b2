"""The tool a looped `llm` agent calls between its model turns, loaded by a worker process as a
user's plugin would be (``DSMO_LOAD=tests.loop_tools``) and by the suite's own workers.

It looks up what the model asked for (the answer's ``step``) and says so: the next model turn's
prompt carries it, so each turn of a run asks the model a question of its own.
"""

from __future__ import annotations

from typing import Any

import dsmo


@dsmo.agent("loop-tool", version="1.0.0")
def loop_tool(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Look up the model's step."""
    result = f"looked-up-{document['step']}"
    return {"result": result}, {"result": result}
