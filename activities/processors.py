"""Agent processors: pure functions from an input document to an output document + summary.

A processor gets the paper's message contract and its input, and returns only data. It
cannot name the next stage: the orchestrator decides that from the summary, if at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dsmo.workflows.contracts import StageMessage
from dsmo.workflows.errors import DsmoError


class UnknownAgent(DsmoError):
    code = "unknown_agent"


class InvalidInput(DsmoError):
    """The input artifact is not what the processor accepts (permanent: retrying won't help)."""

    code = "invalid_input"


@dataclass(frozen=True)
class ProcessorOutput:
    """All a processor returns: its output document and a small summary. There is deliberately
    no field for a next stage; whatever routing hint a processor puts in either is just data."""

    document: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    inference: dict[str, Any] = field(default_factory=dict)  # model, temperature, top_p, seed, promptVersion


ProcessorFn = Callable[[Any, StageMessage], ProcessorOutput]


@dataclass(frozen=True)
class Processor:
    """A registered processor, with what it reads and the summary it returns (for routing)."""

    name: str
    version: str
    fn: ProcessorFn
    description: str = ""
    input_model: type[BaseModel] | None = None
    summary_model: type[BaseModel] | None = None

    @property
    def input_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the input document, if declared."""
        return self.input_model.model_json_schema() if self.input_model else None

    @property
    def summary_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the summary (what transitions read as `stages.<node>.summary`), if declared."""
        return self.summary_model.model_json_schema() if self.summary_model else None


class ProcessorRegistry:
    """Processors by name and version; a node may pin a version or take the latest registered."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, Processor]] = {}

    def register(
        self,
        name: str,
        version: str,
        *,
        description: str = "",
        input_model: type[BaseModel] | None = None,
        summary_model: type[BaseModel] | None = None,
    ) -> Callable[[ProcessorFn], ProcessorFn]:
        """Register ``fn`` as processor ``name`` at ``version``; the models document its contract."""

        def decorate(fn: ProcessorFn) -> ProcessorFn:
            text = description or (fn.__doc__ or "").strip().split("\n")[0]
            self._by_name.setdefault(name, {})[version] = Processor(name, version, fn, text, input_model, summary_model)
            return fn

        return decorate

    def get(self, name: str, version: str | None = None) -> Processor:
        versions = self._by_name.get(name)
        if not versions:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise UnknownAgent(f"agent {name!r} is not registered (registered: {known})")
        if version is None:
            return versions[max(versions, key=_version_key)]
        if version not in versions:
            raise UnknownAgent(f"agent {name!r} has no version {version!r} (has: {', '.join(sorted(versions))})")
        return versions[version]

    def names(self) -> list[str]:
        return sorted(self._by_name)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


default_registry = ProcessorRegistry()


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


@default_registry.register(
    "candidate-profile", version="1.0.0", input_model=CandidateInput, summary_model=CandidateSummary
)
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
