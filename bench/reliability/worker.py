"""The DSMO worker plus one slow agent, as a process of its own so a scenario can SIGKILL it.

`reliability-slow` sleeps for the input's ``delayMs`` (so faults land while stages are in flight)
and returns its input unchanged. Given a ``holdFile``, it first waits until that file exists: a
scenario holds chosen stages in flight until it has struck, instead of hoping one is still
running when the fault lands. Every execution it starts is appended to an execution log, one
JSON line per execution, which is how a scenario counts re-executions and orphans across
worker processes.

    python -m bench.reliability.worker --log executions.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.processors import ProcessorOutput, default_registry
from dsmo.workflows.contracts.activity_io import StageMessage

SLOW_AGENT = "reliability-slow"
MAX_DELAY_MS = 10_000
# A hang guard only: a scenario releases its held stages within seconds of starting them.
MAX_HOLD_S = 240.0


async def _hold(path: Path) -> None:
    """Wait until ``path`` exists (at most MAX_HOLD_S); on the event loop, so a held stage holds no thread."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + MAX_HOLD_S
    while not path.exists() and loop.time() < give_up:
        await asyncio.sleep(0.05)


def execution_logger(log_path: Path) -> Any:
    async def slow_copy(document: Any, message: StageMessage) -> ProcessorOutput:
        if not isinstance(document, dict):
            raise InvalidInput("input: expected an object")
        record = {"run": message.run_id, "stage": message.stage, "attempt": message.attempt, "pid": os.getpid()}
        # One write() on an O_APPEND file: lines from concurrent threads and processes never interleave.
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        if document.get("holdFile"):
            await _hold(Path(str(document["holdFile"])))
        delay_ms = min(max(int(document.get("delayMs", 0)), 0), MAX_DELAY_MS)
        await asyncio.sleep(delay_ms / 1000)
        return ProcessorOutput(document=document, summary={"delayMs": delay_ms})

    return slow_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="the execution log (JSON lines)")
    args = parser.parse_args()
    default_registry.register(SLOW_AGENT, "1.0.0")(execution_logger(args.log.resolve()))

    from dsmo import worker

    worker.main()


if __name__ == "__main__":
    main()
