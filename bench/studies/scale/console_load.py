"""The console under the scale test's load: task list and run page latency with thousands waiting.

`dsmo serve` runs as its own process (as in production) against the stack; a person's session
is opened through the sign-in form, then the task list (first page, and filtered) and run pages
of runs spread over the whole set are fetched one after another over real HTTP; then the task
list again, a few times, each load after its kept total expired (so each counts). The task list's
two visibility calls (its page of rows, its total) are also timed alone, straight against
Temporal, to show which one a fresh page waits for.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client

from bench.metrics import percentile
from dsmo.client.task_counts import FRESH_FOR
from dsmo.client.task_list import PAGE_SIZE, TaskFilter
from dsmo.config.settings import Settings
from dsmo.devstack.stack import free_port_block
from dsmo.server.api_keys import KeyStore

REQUESTS = 60
# Task-list loads spaced past the console's total reuse (FRESH_FOR), each waiting for a new count.
FRESH_LOADS = 10
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def _serve(settings: Settings, keys_file: Path) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port_block(1)
    env = {**os.environ, **settings.to_env(), "DSMO_API_KEYS_FILE": str(keys_file)}
    env["DSMO_INGRESS_BIND"] = f"127.0.0.1:{port}"
    server = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "dsmo"),
        "serve",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as probe:
        for _ in range(200):
            try:
                await probe.get(f"{url}/console/login")
                return server, url
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    server.terminate()
    raise RuntimeError("dsmo serve did not start")


async def _sign_in(client: httpx.AsyncClient, key: str) -> None:
    page = await client.get("/console/login")
    token = CSRF.search(page.text)
    assert token, "no CSRF token on the sign-in page"
    answer = await client.post("/console/login", data={"api_key": key, "csrf_token": token.group(1), "next": ""})
    assert answer.status_code == 303, answer.text[:200]


async def _timed(client: httpx.AsyncClient, paths: list[str]) -> list[float]:
    times = []
    for path in paths:
        began = time.perf_counter()
        answer = await client.get(path)
        times.append(time.perf_counter() - began)
        assert answer.status_code == 200, f"{path}: {answer.status_code} {answer.text[:200]}"
    return times


def _summary(times: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(times, 50) * 1000, "p95_ms": percentile(times, 95) * 1000, "n": len(times)}


async def _visibility_alone(client: Client, query: str) -> tuple[list[float], list[float]]:
    listed, counted = [], []
    for _ in range(REQUESTS):
        request = ListWorkflowExecutionsRequest(namespace=client.namespace, page_size=PAGE_SIZE, query=query)
        began = time.perf_counter()
        await client.workflow_service.list_workflow_executions(request)
        listed.append(time.perf_counter() - began)
        began = time.perf_counter()
        await client.count_workflows(query)
        counted.append(time.perf_counter() - began)
    return listed, counted


async def console_latency(settings: Settings, temporal: Client, agent: str, run_ids: list[str]) -> dict[str, Any]:
    """p50/p95 of the task list (plain and filtered), of run pages and of its visibility calls, in ms."""
    with TemporaryDirectory() as folder:
        keys_file = Path(folder) / "keys.json"
        key = KeyStore(keys_file).add("bench", ["read", "events:*"])
        server, url = await _serve(settings, keys_file)
        try:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                await _sign_in(client, key)
                spread = run_ids[:: max(1, len(run_ids) // REQUESTS)][:REQUESTS]
                await _timed(client, ["/console/"] * 3 + [f"/console/runs/{spread[0]}"] * 3)  # warm-up
                tasks = await _timed(client, ["/console/"] * REQUESTS)
                filtered = await _timed(client, [f"/console/?kind=response&agent={agent}"] * REQUESTS)
                runs = await _timed(client, [f"/console/runs/{run_id}" for run_id in spread])
                fresh = []
                for _ in range(FRESH_LOADS):  # each after the kept total has expired: a count every time
                    await asyncio.sleep(FRESH_FOR + 0.2)
                    fresh += await _timed(client, ["/console/"])
        finally:
            server.terminate()
            await server.wait()
    listed, counted = await _visibility_alone(temporal, TaskFilter().query(datetime.now(UTC)))
    return {
        "tasks": _summary(tasks),
        "tasks_filtered": _summary(filtered),
        "tasks_fresh_total": _summary(fresh),
        "run_page": _summary(runs),
        "visibility_list": _summary(listed),
        "visibility_count": _summary(counted),
    }
