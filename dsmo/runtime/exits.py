"""Leaving a process that used the Temporal client: flush, then exit without teardown."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from dsmo.runtime import logging_setup as worker_logging
from dsmo.runtime.telemetry import flush_tracing


def hard_exit(code: int) -> NoReturn:
    """Flush traces, queued log lines and standard streams, then exit without interpreter teardown.

    The Temporal client's native threads can abort a finishing interpreter ("PyGILState_Release
    ... finalizing", temporalio/sdk-python#300), turning a successful command into exit code -6.
    Scripts that used a `DsmoClient` end with this instead of returning from `main`.

    Args:
        code: The process exit status.
    """
    flush_tracing()
    worker_logging.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
