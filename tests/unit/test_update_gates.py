"""A client sends one flow-control workflow at most a few requests at once; the rest wait their turn."""

from __future__ import annotations

import asyncio

import pytest

from dsmo.client.with_start import UpdateGates

pytestmark = pytest.mark.asyncio


async def test_at_most_the_limit_pass_at_once_per_workflow_and_idle_gates_are_dropped() -> None:
    gates, inside, most = UpdateGates(limit=3), {"a": 0, "b": 0}, {"a": 0, "b": 0}
    release = asyncio.Event()

    async def request(workflow_id: str) -> None:
        async with gates.passing(workflow_id):
            inside[workflow_id] += 1
            most[workflow_id] = max(most[workflow_id], inside[workflow_id])
            await release.wait()
            inside[workflow_id] -= 1

    requests = [asyncio.create_task(request(workflow_id)) for workflow_id in ["a"] * 10 + ["b"] * 2]
    while inside["a"] < 3 or inside["b"] < 2:
        await asyncio.sleep(0)
    assert inside == {"a": 3, "b": 2}  # the others of "a" wait in the client
    release.set()
    await asyncio.gather(*requests)
    assert most == {"a": 3, "b": 2} and gates._gates == {}


async def test_a_request_that_fails_gives_its_place_back() -> None:
    gates = UpdateGates(limit=1)
    with pytest.raises(RuntimeError):
        async with gates.passing("a"):
            raise RuntimeError("refused")
    async with gates.passing("a"):
        assert len(gates._gates) == 1
    assert gates._gates == {}
