"""The stub model both contenders ask: `bench.llm_server`'s `ChatServer` in a process of its own.

In its own process so that the CPU measured in this one (DSMO's worker, or LangGraph's graph) is
the orchestration's and the client's, not the model's. Each run's replies are queued through its
``/script`` endpoint; ``/stats`` counts the calls a run made.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from bench.paths import REPO


@dataclass
class StubModel:
    """A running stub model: its API root (``.../v1``)."""

    url: str

    def _call(self, path: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url.removesuffix("/v1") + path,
            data=data,
            method="GET" if body is None else "POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def script(self, replies: list[dict[str, Any]]) -> None:
        """Queue ``replies`` (`Reply` fields) for the next calls, and zero the call count."""
        self._call("/reset", {})
        self._call("/script", replies)

    def calls(self) -> int:
        """Calls received since the last `script`."""
        return int(self._call("/stats")["requests"])

    def round_trip_s(self, body: dict[str, Any], calls: int) -> float:
        """The median seconds of ``calls`` direct requests with ``body``: the model's own time per
        call as a client sees it (HTTP included), with no orchestration around it."""
        times = []
        with httpx.Client(timeout=10) as client:
            for _ in range(calls + 1):  # the first opens the connection: not counted
                began = time.perf_counter()
                client.post(f"{self.url}/chat/completions", json=body).raise_for_status()
                times.append(time.perf_counter() - began)
        return statistics.median(times[1:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def stub_model() -> Iterator[StubModel]:
    """Start the stub model (latency 0) in a process of its own; stop it when done."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.llm_server", "--port", str(port), "--latency", "0"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    model = StubModel(f"http://127.0.0.1:{port}/v1")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                model.calls()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the stub model did not start") from None
                time.sleep(0.1)
        yield model
    finally:
        process.terminate()
        process.wait(timeout=10)
