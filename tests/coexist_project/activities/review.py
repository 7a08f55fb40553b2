"""An agent registered with DSMO from the team's own `activities` package."""

from __future__ import annotations

from typing import Any

import dsmo

TONE = {"type": "object", "required": ["tone"], "properties": {"tone": {"enum": ["positive", "negative"]}}}


@dsmo.agent("review-tone", version="1.0.0", summary_schema=TONE)
def review_tone(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Counts praise and complaint words in a review."""
    words = document["text"].lower().split()
    praise = sum(word in {"great", "good", "love"} for word in words)
    complaints = sum(word in {"bad", "broken", "slow"} for word in words)
    tone = "positive" if praise >= complaints else "negative"
    return {"praise": praise, "complaints": complaints, "module": __name__}, {"tone": tone}
