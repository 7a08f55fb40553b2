"""The three hostile studies behind the `Study` protocol, in the order `make hostile` runs them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.paths import RESULTS
from bench.stack import Stack
from bench.studies.hostile import llm, loop, memory, sizes


@dataclass
class Memory:
    """Peak memory of the entry points under hostile inputs, then what helper workflows carry."""

    out_dir: Path = field(default=RESULTS)
    name: str = "memory"
    markers: tuple[str, str] | None = (memory.START, memory.END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Both measurements, each on its own stack as before; ``quick`` changes nothing here."""
        cases = await memory.on_a_stack(stack, self.out_dir)
        size_cases = await sizes.on_a_stack(stack, self.out_dir)
        print(memory.table(cases) + "\n\n" + sizes.table(size_cases))
        over = [case.case for case in cases if not case.within_bound]
        over += [size.case for size in size_cases if not size.within_bound]
        slow = [case for case in cases if not case.within_time]
        print(f"\n{len(cases) - len(over)} of {len(cases)} cases within {memory.BOUND_MB} MB over baseline")
        print(
            f"{len(cases) - len(slow)} of {len(cases)} cases kept other requests within "
            f"{memory.CONCURRENT_BOUND_S:.0f} s"
        )
        return {"cases": cases, "sizes": size_cases, "failed": bool(over or slow)}

    def section(self, results: dict[str, Any]) -> str | None:
        """The memory section, with the sizes table inside it."""
        return memory.section(results["cases"], results["sizes"])


@dataclass
class Loop:
    """A control run's latency beside an async agent that blocks the worker's event loop."""

    out_dir: Path = field(default=RESULTS)
    name: str = "loop"
    markers: tuple[str, str] | None = (loop.START, loop.END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Both blockers against the control run; ``quick`` changes nothing here."""
        cases = await loop.on_a_stack(stack, self.out_dir)
        print(loop.table(cases))
        over = [case for case in cases if not case.within_bound]
        print(f"\n{len(cases) - len(over)} of {len(cases)} cases within their bounds")
        return {"cases": cases, "failed": bool(over)}

    def section(self, results: dict[str, Any]) -> str | None:
        """The event-loop section."""
        return loop.section(results["cases"])


@dataclass
class Llm:
    """What one hostile `llm` stage's answer costs the other runs on its worker."""

    out_dir: Path = field(default=RESULTS)
    name: str = "llm"
    markers: tuple[str, str] | None = (llm.START, llm.END)

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """Every hostile answer beside its control runs; ``quick`` changes nothing here."""
        cases = await llm.on_a_stack(stack, self.out_dir)
        print(llm.worker_table(cases))
        slow = [case for case in cases if not case.within_bound]
        print(f"\n{len(cases) - len(slow)} of {len(cases)} cases within {llm.LATENCY_BOUND:g}x")
        return {"cases": cases, "failed": bool(slow)}

    def section(self, results: dict[str, Any]) -> str | None:
        """The model-answer section."""
        return llm.section(results["cases"])


PARTS = ("memory", "loop", "llm")  # `make hostile`'s order (each stops the next if its bound fails)


def hostile(part: str, out_dir: Path = RESULTS) -> Memory | Loop | Llm:
    """The hostile study called ``part`` (one of `PARTS`), writing its results under ``out_dir``."""
    studies: dict[str, type[Memory | Loop | Llm]] = {"memory": Memory, "loop": Loop, "llm": Llm}
    return studies[part](out_dir)
