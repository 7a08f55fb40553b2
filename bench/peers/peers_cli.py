"""`make bench PEERS=1`: W6 alone, on servers it starts itself, and its BENCHMARKS.md section."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from bench.paths import BENCHMARKS, RESULTS
from bench.peers.peer_bench import PeerConfig, peers
from bench.peers.peers_report import END, START, section
from bench.report import machine
from bench.section_files import publish_section

MARKERS = START, END


async def peers_only(quick: bool, *, update_benchmarks: bool) -> dict[str, Any]:
    """Run W6 (the four contenders, then the crash test); print its section, save its JSON."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    command = "make bench PEERS=1" + (" QUICK=1" if quick else "")
    results: dict[str, Any] = {"started_at": stamp, "machine": machine(), "command": command}
    began = time.perf_counter()
    results["peers"] = await peers(PeerConfig.quick() if quick else PeerConfig())
    results["peers"]["seconds"] = round(time.perf_counter() - began, 1)
    page = BENCHMARKS if update_benchmarks else None
    out_dir = RESULTS
    publish_section(results, name="peers", text=section(results), markers=MARKERS, out_dir=out_dir, page=page)
    return results
