"""The candidate-profile agent: normalises the candidate record a screening run starts with."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.plugins import agent
from dsmo.activities.processors import ProcessorOutput
from dsmo.workflows.contracts.activity_io import StageMessage


class _Documented(BaseModel):
    """A processor's declared input or summary: documentation, extra fields allowed."""

    model_config = ConfigDict(extra="allow")


class CandidateRecord(_Documented):
    name: str = Field(min_length=1, description="full name, any spacing or case")
    phone: str | None = Field(default=None, description="any format; only digits and + are kept")
    email: str | None = None
    skills: list[str] = Field(default_factory=list)


class CandidateInput(_Documented):
    candidate: CandidateRecord


class CandidateSummary(_Documented):
    firstName: str = Field(description="the first word of the normalised name")
    hasPhone: bool
    skillCount: int = Field(ge=0, description="distinct skills, lower-cased")


@agent("candidate-profile", version="1.0.0", input_schema=CandidateInput, summary_schema=CandidateSummary)
def candidate_profile(document: Any, message: StageMessage) -> ProcessorOutput:
    """Normalise a candidate record: trimmed, title-cased name, digits-only phone, first name."""
    if not isinstance(document, dict) or not isinstance(document.get("candidate"), dict):
        raise InvalidInput("input: expected an object with a 'candidate' object")
    candidate = document["candidate"]
    name = " ".join(str(candidate.get("name", "")).split()).title()
    if not name:
        raise InvalidInput("input.candidate.name: is required")
    phone = re.sub(r"[^\d+]", "", str(candidate.get("phone", "")))
    skills = sorted({str(skill).strip().lower() for skill in candidate.get("skills", []) if str(skill).strip()})
    profile = {
        "name": name,
        "firstName": name.split()[0],
        "phone": phone or None,
        "email": str(candidate["email"]).strip().lower() if candidate.get("email") else None,
        "skills": skills,
        "source": {"runId": message.run_id, "stage": message.stage, "input": message.artifact_in_uri},
    }
    summary = {"firstName": profile["firstName"], "hasPhone": bool(phone), "skillCount": len(skills)}
    return ProcessorOutput(document=profile, summary=summary)
