"""Agent processors: pure functions from an input document to an output document and a summary.

A processor receives the stage's input document and its message (run id, stage, artifact URIs,
attempt, idempotency key) and returns only data. It cannot name the next stage: the
orchestrator decides that from the summary, if at all. It may be a plain function, run on the
worker's processor threads, or an ``async def``, run on the worker's event loop.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dsmo.activities.contract_schemas import ContractSchema, SchemaDoesNotCompile, SchemaSource, compile_schema
from dsmo.activities.json_values import json_problem
from dsmo.activities.maybe_async import is_async_callable
from dsmo.activities.plugin_errors import ContractViolation, PluginError, UnknownAgent
from dsmo.workflows.contracts.activity_io import StageMessage


@dataclass(frozen=True)
class ProcessorOutput:
    """What a processor returns: its output document and a small summary.

    There is deliberately no field for a next stage; whatever routing hint a processor puts in
    either is just data. A processor may also return a ``(document, summary)`` tuple.

    Attributes:
        document: The output document, stored as the stage's output artifact.
        summary: A small object (at most 16 KB) that transitions read as ``stages.<node>.summary``.
        inference: Model metadata for the audit trail (model, temperature, top_p, seed, promptVersion).
    """

    document: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    inference: dict[str, Any] = field(default_factory=dict)


# A processor returns a ProcessorOutput or a (document, summary) pair, or an awaitable of either.
ProcessorFn = Callable[[Any, StageMessage], Any]


@dataclass(frozen=True)
class Processor:
    """A registered processor and the contract it declares."""

    name: str
    version: str
    fn: ProcessorFn
    description: str = ""
    input: ContractSchema | None = None
    output: ContractSchema | None = None
    summary: ContractSchema | None = None
    blocking: bool = False  # an async def that may block: run on the processor threads, not the loop

    @property
    def is_async(self) -> bool:
        """True for an ``async def`` (or an object whose ``__call__`` is one)."""
        return is_async_callable(self.fn)

    @property
    def input_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the input document, if declared."""
        return self.input.json_schema if self.input else None

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the output document, if declared."""
        return self.output.json_schema if self.output else None

    @property
    def summary_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the summary (what transitions read as `stages.<node>.summary`), if declared."""
        return self.summary.json_schema if self.summary else None

    def check_input(self, document: Any) -> None:
        """Check an input document against the declared input schema.

        Raises:
            ContractViolation: It does not match (the message names the field).
        """
        if self.input is not None:
            self.input.check(document, agent=self.name, what="input")

    def check_result(self, output: ProcessorOutput) -> None:
        """Check what the processor returned: JSON objects matching the declared schemas.

        Raises:
            ContractViolation: The document or summary is not an object of plain JSON values
                (finite numbers, string keys, no sets or other objects), or does not match.
        """
        if not isinstance(output.document, dict):
            raise ContractViolation(f"agent {self.name}: output must be a JSON object")
        if not isinstance(output.summary, dict):
            raise ContractViolation(f"agent {self.name}: summary must be a JSON object")
        for what, value in (("output", output.document), ("summary", output.summary), ("inference", output.inference)):
            problem = json_problem(value, what=what)
            if problem is not None:
                raise ContractViolation(f"agent {self.name}: {problem}")
        if self.output is not None:
            self.output.check(output.document, agent=self.name, what="output")
        if self.summary is not None:
            self.summary.check(output.summary, agent=self.name, what="summary")


class ProcessorRegistry:
    """Processors by name and version; a node may pin a version or take the latest registered."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, Processor]] = {}

    def register(
        self,
        name: str,
        version: str = "1.0.0",
        *,
        description: str = "",
        input_schema: SchemaSource | None = None,
        output_schema: SchemaSource | None = None,
        summary_schema: SchemaSource | None = None,
        blocking: bool = False,
    ) -> Callable[[ProcessorFn], ProcessorFn]:
        """A decorator registering a processor as ``name`` at ``version``.

        Raises:
            PluginError: The function does not take ``(document, message)``, a schema does not
                compile, or another function is registered as ``name@version``.
        """

        def decorate(fn: ProcessorFn) -> ProcessorFn:
            label = f"agent {name}@{version}"
            check_takes(fn, label, "(document, message)")
            try:
                schemas = [compile_schema(source) for source in (input_schema, output_schema, summary_schema)]
            except SchemaDoesNotCompile as err:
                raise PluginError(f"{label}: a schema does not compile: {err}") from None
            text = description or (inspect.getdoc(fn) or "").split("\n")[0]
            inputs, outputs, summaries = schemas
            self.add(Processor(name, version, fn, text, inputs, outputs, summaries, blocking=blocking))
            return fn

        return decorate

    def add(self, processor: Processor) -> None:
        """Add ``processor``; adding the same function again under its name and version is harmless.

        Raises:
            PluginError: Another function is registered under the same name and version.
        """
        versions = self._by_name.setdefault(processor.name, {})
        known = versions.get(processor.version)
        if known is not None and known.fn is not processor.fn:
            raise PluginError(
                f"agent {processor.name}@{processor.version} is registered twice "
                f"({_where(known.fn)} and {_where(processor.fn)})"
            )
        versions[processor.version] = processor

    def get(self, name: str, version: str | None = None) -> Processor:
        """The processor ``name`` at ``version`` (default: its latest).

        Raises:
            UnknownAgent: No processor has that name, or not that version.
        """
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
        """Registered processor names, sorted."""
        return sorted(self._by_name)

    def processors(self) -> list[Processor]:
        """Every registered processor, every version, by name then version."""
        return [
            versions[version]
            for _, versions in sorted(self._by_name.items())
            for version in sorted(versions, key=_version_key)
        ]

    def copy(self) -> ProcessorRegistry:
        """A new registry with the same processors (tests add their own to it)."""
        duplicate = ProcessorRegistry()
        for processor in self.processors():
            duplicate.add(processor)
        return duplicate


def as_output(result: Any, *, agent: str) -> ProcessorOutput:
    """A processor's return value as a ProcessorOutput.

    Raises:
        ContractViolation: It is neither a ProcessorOutput nor a ``(document, summary)`` pair.
    """
    if isinstance(result, ProcessorOutput):
        return result
    if isinstance(result, tuple) and len(result) == 2:
        document, summary = result
        return ProcessorOutput(document=document, summary=summary if summary is not None else {})
    raise ContractViolation(
        f"agent {agent}: a processor returns ProcessorOutput or (document, summary), not {type(result).__name__}"
    )


def check_takes(fn: Callable[..., Any], label: str, expected: str, *, arguments: int = 2) -> None:
    """Raise PluginError unless ``fn`` can be called with ``arguments`` positional arguments."""
    if not callable(fn):
        raise PluginError(f"{label}: {fn!r} is not callable")
    try:
        inspect.signature(fn).bind(*([None] * arguments))
    except TypeError:
        raise PluginError(f"{label}: {_where(fn)}{inspect.signature(fn)} must take {expected}") from None
    except ValueError:
        return  # a builtin without a signature: trust it


def _where(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


# The processors the decorators register; a worker serves these after loading its plugins.
default_registry = ProcessorRegistry()
