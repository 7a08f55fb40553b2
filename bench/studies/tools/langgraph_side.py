"""LangGraph's side of the tools study: the same support agent as a `StateGraph` with a
PostgreSQL checkpointer, asking the same stub model.

Written as a LangGraph user writes a tool-calling agent: a model node (a plain HTTP call to the
chat-completions endpoint, with the tools, as DSMO's worker makes it), a tools node that runs
the lookup, a conditional edge on the answer's ``tool_calls``; compiled with
``AsyncPostgresSaver`` and run with ``durability="sync"``, so every step's checkpoint is written
before the next step starts (as DSMO commits each turn before the next). PostgreSQL is
pgserver's, started here; its CPU is the postmaster's with its backends'. One short run warms
the graph and the connection; the measured run follows.
"""

from __future__ import annotations

import json
import operator
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import psutil  # type: ignore[import-untyped]
import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph

from bench.studies.peers.peer_servers import Postgres
from bench.studies.tools.agent import ANSWER, WARM_UP_TURNS, Orders, first_messages, offered_tools, script, support
from bench.studies.tools.model import StubModel

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


class State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def build_graph(client: httpx.AsyncClient, url: str, tools: list[dict[str, Any]], orders: Orders) -> Any:
    """The agent's graph (not compiled): model -> tools -> model ... until an answer without calls."""
    functions = {"lookup_order": orders.lookup, "refund": orders.refund}

    async def model(state: State) -> dict[str, Any]:
        body = {"model": "local-chat-1", "messages": state["messages"], "temperature": 0.0, "tools": tools}
        response = await client.post(f"{url}/chat/completions", json=body)
        response.raise_for_status()
        return {"messages": [response.json()["choices"][0]["message"]]}

    def run_tools(state: State) -> dict[str, Any]:
        results = []
        for call in state["messages"][-1]["tool_calls"]:
            output = functions[call["function"]["name"]](json.loads(call["function"]["arguments"]))
            results.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(output, sort_keys=True)})
        return {"messages": results}

    def route(state: State) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", run_tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph


async def _one_run(graph: Any, messages: list[dict[str, Any]], turns: int) -> tuple[str, float]:
    """Run one thread to its answer; (its id, its wall seconds). Raises if the answer is not the script's."""
    thread_id = f"bench-tools-{uuid.uuid4().hex[:8]}"
    # Two steps a turn (model, tools) and the answer's: past LangGraph's default limit of 25.
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * turns + 10}
    began = time.perf_counter()
    final = await graph.ainvoke({"messages": messages}, config, durability="sync")
    wall = time.perf_counter() - began
    if json.loads(final["messages"][-1]["content"]) != ANSWER:
        raise RuntimeError(f"tools study: LangGraph thread {thread_id} ended with {final['messages'][-1]}")
    return thread_id, wall


def _checkpoints(dsn: str, thread_id: str) -> tuple[int, int]:
    """(rows, bytes) the checkpointer keeps of the thread: what the engine keeps of the run."""
    rows, size = 0, 0
    with psycopg.connect(dsn) as conn:
        for table in CHECKPOINT_TABLES:
            counted = conn.execute(
                f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t WHERE thread_id = %s",
                (thread_id,),
            ).fetchone()
            assert counted is not None
            rows, size = rows + int(counted[0]), size + int(counted[1])
    return rows, size


def _process_cpu_s() -> float:
    times = psutil.Process(os.getpid()).cpu_times()
    return float(times.user + times.system)


async def langgraph_side(model: StubModel, turns: int) -> dict[str, Any]:
    """One measured run of the support agent with ``turns`` lookups on LangGraph + PostgresSaver.

    Args:
        model: the stub model, shared with the other contender.
        turns: the lookups the model asks for before it answers.

    Returns:
        The run's totals, as `dsmo_side`'s: ``turns``, ``model_calls``, ``wall_s``, ``cpu_s``
        (``process``: this one, ``server``: PostgreSQL) and ``state`` (checkpoint ``records`` and
        ``bytes``).
    """
    postgres = Postgres(Path(tempfile.mkdtemp(prefix="bench-tools-pg-")))
    try:
        dsn = postgres.create_database("bench_tools")
        definition = support(turns)
        orders = Orders()
        async with (
            httpx.AsyncClient(timeout=30) as client,
            AsyncPostgresSaver.from_conn_string(dsn) as saver,
        ):
            await saver.setup()
            graph = build_graph(client, model.url, offered_tools(definition), orders).compile(checkpointer=saver)
            model.script(script(WARM_UP_TURNS))
            await _one_run(graph, first_messages(definition), WARM_UP_TURNS)
            model.script(script(turns))
            orders.lookups = 0
            before = {"process": _process_cpu_s(), "server": postgres.cpu_seconds()}
            thread_id, wall = await _one_run(graph, first_messages(definition), turns)
            after = {"process": _process_cpu_s(), "server": postgres.cpu_seconds()}
        records, size = _checkpoints(dsn, thread_id)
        return {
            "thread_id": thread_id,
            "turns": orders.lookups,
            "model_calls": model.calls(),
            "wall_s": wall,
            "cpu_s": {role: after[role] - before[role] for role in before},
            "state": {"what": "checkpoint rows", "records": records, "bytes": size},
        }
    finally:
        postgres.stop()
