"""Reading back what an `invoke` step's STAGE_SUCCEEDED recorded of its action's output.

A run without a data subject records the output inline (``output``). A run about a subject
records ``outputRef`` instead: the output stored sealed with the subject's key (``events/{run}/...``),
its size and SHA-256, so the trail, which outlives an erasure, never holds it in the clear. If the
sealed copy could not be written the trail keeps only ``outputDigest``.
"""

from __future__ import annotations

from typing import Any

from dsmo.activities.artifacts import ArtifactStore
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import AuditEvent
from dsmo.workflows.contracts.trail_io import values_digest


def action_output(store: ArtifactStore, event: AuditEvent) -> dict[str, Any] | None:
    """The output an action's STAGE_SUCCEEDED recorded: inline, or read from the store by reference.

    Returns:
        The output; None when the event records none (a failed step, or not an action's event).

    Raises:
        DsmoError: The output was kept only as a digest, or the stored object is not the one the
            trail recorded (its SHA-256 differs).
        ArtifactErased: The run's data subject was erased (``erased`` in its message).
    """
    ref = event.data.get("outputRef")
    if isinstance(ref, dict) and ref.get("uri"):
        output: dict[str, Any] = store.read_json(str(ref["uri"]))
        if values_digest(output) != ref.get("sha256"):
            raise DsmoError(
                f"{ref['uri']} does not hold the output STAGE_SUCCEEDED #{event.seq} recorded (sha256 differs)"
            )
        return output
    if "outputDigest" in event.data:
        raise DsmoError(
            f"STAGE_SUCCEEDED #{event.seq} kept only the digest of its action's output; it cannot be replayed"
        )
    inline = event.data.get("output")
    return dict(inline) if isinstance(inline, dict) else None
