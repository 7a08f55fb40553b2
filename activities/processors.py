"""Agent processors: pure functions from an input document to an output document + summary.

A processor gets the paper's message contract and its input, and returns only data. It
cannot name the next stage: the orchestrator decides that from the summary, if at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workflows.contracts import StageMessage
from workflows.errors import DsmoError


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
    name: str
    version: str
    fn: ProcessorFn


class ProcessorRegistry:
    """Processors by name and version; a node may pin a version or take the latest registered."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, Processor]] = {}

    def register(self, name: str, version: str) -> Callable[[ProcessorFn], ProcessorFn]:
        def decorate(fn: ProcessorFn) -> ProcessorFn:
            self._by_name.setdefault(name, {})[version] = Processor(name, version, fn)
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


@default_registry.register("candidate-profile", version="1.0.0")
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
