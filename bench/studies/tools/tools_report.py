"""The tools study's arithmetic and its section of BENCHMARKS.md: one table, DSMO beside LangGraph."""

from __future__ import annotations

from typing import Any

START, END = "<!-- tools:start -->", "<!-- tools:end -->"
LABELS = {"dsmo": "DSMO", "langgraph": "LangGraph + AsyncPostgresSaver"}
ROLES = ("process", "server", "store")


def per_turn(measured: dict[str, Any], model_round_trip_s: float) -> dict[str, Any]:
    """One contender's run divided by its tool turns.

    Args:
        measured: the run's totals (`dsmo_side` / `langgraph_side`): ``turns``, ``model_calls``,
            ``wall_s``, ``cpu_s`` by process, ``state``.
        model_round_trip_s: the stub model's own time per call, asked directly.

    Returns:
        ``wall_ms``; ``model_ms`` (the run's model calls at the direct round trip, per turn);
        ``overhead_ms`` (wall less the model's time); ``cpu_ms`` by process and ``total``;
        ``state_records`` and ``state_bytes``.
    """
    turns = measured["turns"]
    wall_ms = measured["wall_s"] * 1000 / turns
    model_ms = measured["model_calls"] * model_round_trip_s * 1000 / turns
    cpu_ms = {role: seconds * 1000 / turns for role, seconds in measured["cpu_s"].items()}
    return {
        "wall_ms": wall_ms,
        "model_ms": model_ms,
        "overhead_ms": wall_ms - model_ms,
        "cpu_ms": {**cpu_ms, "total": sum(cpu_ms.values())},
        "state_records": measured["state"]["records"] / turns,
        "state_bytes": measured["state"]["bytes"] / turns,
    }


def table(contenders: dict[str, Any]) -> str:
    """The section's table: a row per contender."""
    lines = [
        "| contender | turns | wall ms per turn | orchestration overhead ms per turn "
        "| CPU ms per turn: client / worker process | its server | S3 store | total "
        "| engine state per turn (records, bytes) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, measured in contenders.items():
        figures, cpu = measured["per_turn"], measured["per_turn"]["cpu_ms"]
        store = f"{cpu['store']:.1f}" if "store" in cpu else "—"
        lines.append(
            f"| {LABELS.get(name, name)} | {measured['turns']} | {figures['wall_ms']:.1f} "
            f"| {figures['overhead_ms']:.1f} | {cpu.get('process', 0.0):.1f} | {cpu.get('server', 0.0):.1f} "
            f"| {store} | {cpu['total']:.1f} "
            f"| {figures['state_records']:.1f} {measured['state']['what']}, {figures['state_bytes'] / 1000:.1f} KB |"
        )
    return "\n".join(lines)


def section(results: dict[str, Any]) -> str | None:
    """The study's section, markers included; None when it did not run."""
    tools = results.get("tools")
    if not tools:
        return None
    return f"""{START}
## A tool-using agent, per turn: DSMO beside LangGraph (`make bench TOOLS=1`)

Measured by `{results["command"]}` on {results["started_at"]} ({results.get("seconds", "?")} s), on
{results["machine"]}. The support agent of [docs/tools.md](docs/tools.md): the model looks the
order up {tools["turns"]} times (one `lookup_order` call a turn), then answers. Both contenders ask
the same stub model (`bench/llm_server.py`, latency 0, in its own process) with the same prompts
and tools, and run the same lookup function: DSMO on a worker in the bench's process, each call a
`run_tool` activity, the conversation in the S3 store; LangGraph as a `StateGraph` (model node,
tools node, a conditional edge on `tool_calls`) checkpointed by `AsyncPostgresSaver` on pgserver's
PostgreSQL with `durability="sync"`. Each contender does one unmeasured one-turn run first.

{table(tools["contenders"])}

Each figure is one run (start to answer, the final answer included) divided by its tool turns;
orchestration overhead is that wall time less the model's own time, its calls at the round trip
the stub answers a direct request in ({tools["model_round_trip_ms"]:.2f} ms). CPU is user + system
time of the bench's process (DSMO's client and worker, or LangGraph's graph and client), of the
engine's server (Temporal, or PostgreSQL with its backends) and of the S3 store; one run on this
machine, so take the ratios, not the absolute figures.
{END}"""
