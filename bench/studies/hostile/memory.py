"""`make hostile`: peak memory of DSMO's entry points fed the hostile inputs an outside prober
used (alias bombs, costly conditions, deep nesting, gigabyte bodies), over each one's baseline;
for a page that costs time to produce (a 500-node definition), how long other requests wait.

Each case runs a real entry point in its own process: `dsmo definitions validate` (peak RSS of
that process against a valid definition's), and `dsmo serve` / `dsmo codec-server` (the server's
peak RSS after the request against its peak after a normal one). Prints a table and writes
`bench/results/hostile.json`. The stated bound is BOUND_MB over baseline.

    python -m bench hostile [--out DIR] [--update]

Longer than most modules because the hostile inputs are written out here, each beside the entry
point it is fed to.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.paths import REPO
from bench.report import machine
from bench.stack import Stack
from bench.studies.hostile import sizes as hostile_sizes
from dsmo.activities.definition_store import DefinitionStore
from dsmo.client.codec import new_key
from dsmo.config.settings import Settings
from dsmo.devstack.stack import free_port_block
from dsmo.runtime.storage import artifact_store
from dsmo.server.api_keys import KeyStore
from dsmo.workflows.definition.model import parse_definition

START, END = "<!-- hostile:start -->", "<!-- hostile:end -->"  # its section in BENCHMARKS.md
BIN = Path(sys.executable).parent
BOUND_MB = 300
# While a hostile page is being produced, another request is answered within this (seconds).
CONCURRENT_BOUND_S = 1.0
LARGE_GRAPH_NODES = 500
GIGABYTE = 1 << 30
CHUNK = 1 << 16
CHAINED_REPLACE = "'a'" + ".replace('a','aa')" * 27 + " != ''"


@dataclass
class Case:
    """One hostile input through one entry point."""

    entry: str
    case: str
    answer: str
    peak_mb: float
    over_baseline_mb: float
    seconds: float
    concurrent_s: float | None = None  # the slowest other request answered meanwhile, when measured

    @property
    def within_bound(self) -> bool:
        """Within the memory bound (the suite checks this one: memory is not a matter of luck)."""
        return self.over_baseline_mb <= BOUND_MB

    @property
    def within_time(self) -> bool:
        """Other requests were answered within `CONCURRENT_BOUND_S` (checked by `make hostile`)."""
        return self.concurrent_s is None or self.concurrent_s <= CONCURRENT_BOUND_S


# -- definitions through `dsmo definitions validate` ------------------------------------------


def _nested_alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 9)}]")
    body = "\n".join(f"  {line}" for line in lines)
    node = "  a: {actionType: send_message, parameters: {message: hi}}"
    return f"agent: bomb\nstart: a\nconfig:\n{body}\nnodes:\n{node}\n"


def _condition(expression: str) -> str:
    return json.dumps(
        {
            "agent": "costly",
            "inputs": ["L"],
            "start": "a",
            "nodes": {
                "a": {
                    "actionType": "send_message",
                    "parameters": {"message": "x"},
                    "transitions": [{"when": expression, "to": "b"}, {"to": "b"}],
                },
                "b": {"actionType": "send_message", "parameters": {"message": "y"}},
            },
        }
    )


def _message(text: str) -> str:
    node = {"actionType": "send_message", "parameters": {"message": text}}
    return json.dumps({"agent": "tpl", "start": "a", "nodes": {"a": node}})


def _deep(levels: int) -> str:
    config: Any = 1
    for _ in range(levels):
        config = {"k": config}
    return json.dumps({"agent": "deep", "start": "a", "config": config, "nodes": {"a": {"actionType": "send_message"}}})


def definition_cases() -> dict[str, str]:
    six_maps = "size(" + "".join(f"L.map(x{i}, " for i in range(6)) + "1" + ")" * 6 + ") > 0"
    return {
        "nested YAML aliases (9^9 strings)": _nested_alias_bomb(),
        "six nested map comprehensions": _condition(six_maps),
        "lists.range(100000000)": _condition("size(lists.range(100000000)) > 0"),
        "27 chained replace('a','aa')": _condition(CHAINED_REPLACE),
        # Under the 4,000-character cap on a message, so the template scan itself runs.
        "'{{ ' and 3,990 spaces in a message": _message("{{ " + " " * 3_990),
        "definition nested 500 deep": _deep(500),
    }


def large_graph(agent: str, nodes: int = LARGE_GRAPH_NODES) -> dict[str, Any]:
    """A valid definition of ``nodes`` waits, each going on to the next and jumping ahead, back
    and across the graph (a layered layout of it took minutes)."""
    spec: dict[str, Any] = {}
    for index in range(nodes - 1):
        jumps = (index + 1, index + 7, index - 13, (index * 37) % nodes)
        ahead, *others = dict.fromkeys(to for to in jumps if 0 <= to < nodes and to != index)
        spec[f"n{index}"] = {
            "actionType": "wait_for_response",
            "transitions": [{"when": f"lastResponse == 'to {to}'", "to": f"n{to}"} for to in others]
            + [{"to": f"n{ahead}"}],
        }
    spec[f"n{nodes - 1}"] = {"actionType": "send_message", "parameters": {"message": "done"}}
    return {"agent": agent, "start": "n0", "nodes": spec}


# A child's peak RSS starts at its parent's RSS when it forks and survives exec, so a command
# started from this (large) process would report at least this process's size. A small launcher
# starts it instead and reports the command's own peak from wait4.
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:])\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(f'\\npeak-rss-kb {usage.ru_maxrss}', flush=True)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def _peak_of(command: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    """Run ``command``; its exit code, first line of output and its own peak RSS in MB."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command], capture_output=True, env=env, check=False, timeout=300
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    lines = [line for line in output.splitlines() if line.strip()]
    peak_kb = next(int(line.split()[1]) for line in lines if line.startswith("peak-rss-kb "))
    first = next((line for line in lines if not line.startswith("peak-rss-kb ")), "")
    return done.returncode, first[:110], peak_kb / 1024


def measure_definitions(env: dict[str, str], folder: Path) -> list[Case]:
    baseline = REPO / "examples" / "triage.yaml"
    _, _, base_mb = _peak_of([str(BIN / "dsmo"), "definitions", "validate", str(baseline)], env)
    cases = []
    for name, text in definition_cases().items():
        path = folder / "case.yaml"
        path.write_text(text)
        started = time.monotonic()
        code, first, peak = _peak_of([str(BIN / "dsmo"), "definitions", "validate", str(path)], env)
        answer = f"exit {code}: {first.replace(str(path), path.name)}"
        cases.append(Case("dsmo definitions validate", name, answer, peak, peak - base_mb, time.monotonic() - started))
    # Publishable: each replace is capped at 64 KiB when evaluated, so evaluation stops early.
    evaluate = "from dsmo.workflows.definition.conditions import evaluate_condition as e; e({!r}, {{}})"
    _, _, python_mb = _peak_of([sys.executable, "-c", evaluate.format("1 == 1")], env)
    started = time.monotonic()
    code, first, peak = _peak_of([sys.executable, "-c", evaluate.format(CHAINED_REPLACE)], env)
    cases.append(
        Case("condition evaluation", "27 chained replace('a','aa')", f"exit {code}: {first}", peak, peak - python_mb,
             time.monotonic() - started)
    )  # fmt: skip
    started = time.monotonic()
    code, first, peak = _peak_of([str(BIN / "dsmo"), "definitions", "validate", "/dev/zero"], env)
    cases.append(
        Case("dsmo definitions validate", "/dev/zero", f"exit {code}: {first}", peak, peak - base_mb,
             time.monotonic() - started)
    )  # fmt: skip
    return cases


# -- servers: `dsmo serve` and `dsmo codec-server` --------------------------------------------


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


async def _chunked(url: str, path: str, headers: dict[str, str], total: int) -> str:
    """POST ``total`` bytes of zeros chunked, stopping as soon as the server answers."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode())
    answer = asyncio.ensure_future(reader.readuntil(b"\r\n"))
    chunk = f"{CHUNK:x}\r\n".encode() + b"\0" * CHUNK + b"\r\n"
    sent = 0
    try:
        while sent < total and not answer.done():
            writer.write(chunk)
            await writer.drain()
            sent += CHUNK
        status = (await asyncio.wait_for(answer, 60)).decode().split(" ", 2)[1]
    except (ConnectionError, asyncio.IncompleteReadError):
        status = "connection closed"
    finally:
        writer.close()
    return f"{status} after {sent >> 10:,} KiB sent"


async def _declared(url: str, path: str, headers: dict[str, str], length: int) -> str:
    """Declare a ``length``-byte body, send a few bytes of it, and read the answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n{head}\r\n{{}}".encode())
    await writer.drain()
    try:
        status_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), 60)
    finally:
        writer.close()
    return status_line.decode().split(" ", 2)[1]


def _start(command: list[str], env: dict[str, str], url: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{command[1]} did not start")


async def measure_ingress(settings: Settings, folder: Path) -> list[Case]:
    port = free_port_block(1)
    settings = settings.with_changes(ingress={"api_keys_file": str(folder / "keys.json"), "bind": f"127.0.0.1:{port}"})
    key = KeyStore(settings.api_keys_path).add("prober", ["events:*", "start", "read"])
    env = {**os.environ, **settings.to_env()}
    url = f"http://127.0.0.1:{port}"
    process = _start([str(BIN / "dsmo"), "serve"], env, f"{url}/openapi.json")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            await client.get("/executions", headers={"X-API-Key": key})  # a normal request: the baseline
        base = _peak_rss_mb(process.pid)
        cases = []
        path = "/executions/run-1/events"
        for name, headers, total in [
            ("1 GiB chunked body, no key", {}, GIGABYTE),
            ("1 GiB chunked body, valid key", {"X-API-Key": key}, GIGABYTE),
        ]:
            started = time.monotonic()
            answer = await _chunked(url, path, headers, total)
            peak = _peak_rss_mb(process.pid)
            cases.append(Case("dsmo serve", name, answer, peak, peak - base, time.monotonic() - started))
        started = time.monotonic()
        answer = await _declared(url, path, {"X-API-Key": key}, GIGABYTE)
        peak = _peak_rss_mb(process.pid)
        cases.append(
            Case("dsmo serve", "Content-Length: 1 GiB declared", answer, peak, peak - base, time.monotonic() - started)
        )
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            deep = "{" + '"a":{' * 900 + "}" * 901
            started = time.monotonic()
            body = b'{"type":"MESSAGE_RECEIVED","event_id":"e1","data":' + deep.encode() + b"}"
            response = await client.post(
                path, content=body, headers={"X-API-Key": key, "Content-Type": "application/json"}
            )
            peak = _peak_rss_mb(process.pid)
            cases.append(
                Case("dsmo serve", "event data nested 900 deep", str(response.status_code), peak, peak - base,
                     time.monotonic() - started)
            )  # fmt: skip
        cases.append(await _definition_page(settings, url, key, process.pid, base))
        return cases
    finally:
        process.terminate()
        process.wait(timeout=15)


async def _definition_page(settings: Settings, url: str, key: str, pid: int, base: float) -> Case:
    """A 500-node definition's console page, first opened, while another client reads a run."""
    DefinitionStore(artifact_store(settings)).publish(parse_definition(large_graph("hostile-large")))
    async with (
        httpx.AsyncClient(base_url=url, timeout=300) as browser,
        httpx.AsyncClient(base_url=url, timeout=300, headers={"X-API-Key": key}) as api,
    ):
        form = await browser.get("/console/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token, "the sign-in page has no CSRF token"
        await browser.post("/console/login", data={"api_key": key, "next": "/console/", "csrf_token": token[1]})
        started = time.monotonic()
        page = asyncio.ensure_future(browser.get("/console/definitions/hostile-large"))
        latencies = []
        while not page.done():
            asked = time.monotonic()
            await api.get("/executions/no-such-run")
            latencies.append(time.monotonic() - asked)
            await asyncio.sleep(0.05)
        answer = await page
        seconds = time.monotonic() - started
    peak = _peak_rss_mb(pid)
    slowest = max(latencies, default=0.0)
    text = (
        f"{answer.status_code}, {len(answer.content) / 1e6:.2f} MB of HTML; "
        f"{len(latencies)} read{'' if len(latencies) == 1 else 's'} answered meanwhile, "
        f"slowest {slowest:.2f} s (bound {CONCURRENT_BOUND_S:.0f} s)"
    )
    return Case("dsmo serve", f"console page of a {LARGE_GRAPH_NODES}-node definition", text, peak, peak - base,
                seconds, slowest)  # fmt: skip


async def measure_codec_server(settings: Settings) -> list[Case]:
    port = free_port_block(1)
    env = {**os.environ, **settings.to_env(), "DSMO_CODEC_KEYS": f"k1:{new_key()}"}
    url = f"http://127.0.0.1:{port}"
    command = [str(BIN / "dsmo"), "codec-server", "--bind", f"127.0.0.1:{port}", "--token", "t0ken"]
    process = _start(command, env, f"{url}/decode")
    try:
        headers = {"Authorization": "Bearer t0ken", "X-Namespace": "default"}
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            await client.post("/encode", json={"payloads": []}, headers=headers)
        base = _peak_rss_mb(process.pid)
        started = time.monotonic()
        answer = await _chunked(url, "/decode", {**headers, "Content-Type": "application/json"}, 200 << 20)
        peak = _peak_rss_mb(process.pid)
        return [
            Case("dsmo codec-server", "200 MiB chunked body", answer, peak, peak - base, time.monotonic() - started)
        ]
    finally:
        process.terminate()
        process.wait(timeout=15)


async def measure(settings: Settings, out_dir: Path) -> list[Case]:
    """Every case against the stack ``settings`` name; writes ``out_dir/hostile.json``."""
    with tempfile.TemporaryDirectory(prefix="dsmo-hostile-") as folder:
        env = {**os.environ, **settings.to_env()}
        cases = measure_definitions(env, Path(folder))
        cases += await measure_ingress(settings, Path(folder))
        cases += await measure_codec_server(settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    document = {"boundMb": BOUND_MB, "cases": [asdict(case) | {"withinBound": case.within_bound} for case in cases]}
    (out_dir / "hostile.json").write_text(json.dumps(document, indent=2) + "\n")
    return cases


async def on_a_stack(stack: Stack, out_dir: Path) -> list[Case]:
    """`measure` on ``stack()``."""
    async with stack() as (settings, _):
        return await measure(settings, out_dir)


def table(cases: list[Case]) -> str:
    lines = [
        f"| entry point | hostile input | answer | peak RSS (MB) | over baseline (MB, bound {BOUND_MB}) | s |",
        "|---|---|---|---:|---:|---:|",
    ]
    for case in cases:
        lines.append(
            f"| {case.entry} | {case.case} | {case.answer.replace('|', '/')} | {case.peak_mb:.0f} "
            f"| {case.over_baseline_mb:.0f} | {case.seconds:.1f} |"
        )
    return "\n".join(lines)


def section(cases: list[Case], sizes: list[hostile_sizes.SizeCase]) -> str:
    """The BENCHMARKS.md section, between its markers."""
    return f"""{START}
## Memory under hostile inputs

Measured by `make hostile` on {datetime.now(UTC).isoformat(timespec="seconds")}, on {machine()}.
Each hostile input goes through a real entry point in its own process; "over baseline" is that
process's peak RSS minus its peak on a normal input (a valid definition, a normal request).
The stated bound is {BOUND_MB} MB over baseline; while a hostile page is produced, other requests
are answered within {CONCURRENT_BOUND_S:.0f} s ("s" is the time to the hostile input's answer).

{table(cases)}

What DSMO's helper workflows and a move carry, against Temporal's 2 MB payload limit: what is
refused, at what size, how fast (`bench/studies/hostile/sizes.py`; "failed workflow tasks" scans every
history involved, so a payload limit hit would show there):

{hostile_sizes.table(sizes)}
{END}"""
