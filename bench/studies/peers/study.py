"""W6 behind the `Study` protocol: `python -m bench peers` (`make bench PEERS=1`), on servers it starts itself."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.paths import RESULTS
from bench.report import machine
from bench.section_files import publish_section
from bench.stack import Stack
from bench.studies.peers.peers_report import END, START, section

MARKERS = START, END


@dataclass
class Peers:
    """DSMO beside raw Temporal, LangGraph and DBOS on one graph, then the crash ledger."""

    name: str = "peers"
    markers: tuple[str, str] | None = MARKERS

    async def run(self, quick: bool, stack: Stack) -> dict[str, Any]:
        """W6 (the four contenders, then the crash test); prints its section, saves its JSON.

        ``stack`` is unused: W6 starts its own servers.
        """
        from bench.studies.peers.peer_bench import PeerConfig, peers  # imports LangGraph and DBOS: only when run

        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = "make bench PEERS=1" + (" QUICK=1" if quick else "")
        results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
        began = time.perf_counter()
        results["peers"] = await peers(PeerConfig.quick() if quick else PeerConfig())
        results["peers"]["seconds"] = round(time.perf_counter() - began, 1)
        publish_section(results, name="peers", text=section(results), markers=MARKERS, out_dir=RESULTS, page=None)
        return results

    def section(self, results: dict[str, Any]) -> str | None:
        """W6's section."""
        return section(results)
