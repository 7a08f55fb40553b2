"""The tool a looped `llm` agent calls between its model turns: the suite's in-process workers
register it in a registry of their own (`registry_with_loop_tool`); a worker process loads it as a
user's plugin would (``DSMO_LOAD=tests.loop_tool_plugin``). Nothing here touches the process's
default registry, which the agent catalog's tests read.

It looks up what the model asked for (the answer's ``step``) and says so: the next model turn's
prompt carries it, so each turn of a run asks the model a question of its own.
"""

from __future__ import annotations

from typing import Any

from dsmo.activities.processors import ProcessorRegistry, default_registry
from dsmo.workflows.contracts.activity_io import StageMessage

NAME, VERSION = "loop-tool", "1.0.0"


def look_up(document: dict[str, Any], message: StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Look up the model's step."""
    result = f"looked-up-{document['step']}"
    return {"result": result}, {"result": result}


def registry_with_loop_tool() -> ProcessorRegistry:
    """The built-in processors and the loop's tool."""
    registry = ProcessorRegistry()
    for name in default_registry.names():
        processor = default_registry.get(name)
        registry.register(processor.name, processor.version)(processor.fn)
    registry.register(NAME, VERSION)(look_up)
    return registry
