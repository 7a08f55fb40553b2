"""A short stage with an outside effect, as a user's plugin: a worker process started with
``DSMO_LOAD=tests.effect_stage_plugin`` serves it (tests/integration/runs/test_effect_after_a_reply.py).

The effect is a file per idempotency key in ``EFFECT_LEDGER_DIR``, created exclusively, as a
receiver that dedupes by key does. With ``hold`` in that folder, the agent stops after its effect
and before answering (it writes ``effect-sent`` and waits), so a test can kill the worker between
the effect and its record.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import dsmo
from dsmo.workflows.contracts.activity_io import StageMessage


@dsmo.agent("effect-send")
def send(document: Any, message: StageMessage) -> dsmo.ProcessorOutput:
    folder = Path(os.environ["EFFECT_LEDGER_DIR"])
    with (folder / f"effect-{message.stage}-{message.idempotency_key.replace(':', '_')}").open("a") as entry:
        entry.write(f"attempt {message.attempt}\n")
    if (folder / "hold").exists():
        (folder / "effect-sent").write_text(message.stage)
        time.sleep(600)  # the test kills the worker here: the effect is out, its record is not
    return dsmo.ProcessorOutput(document={"sent": message.stage})
