"""The queue's agents on hand-made deliveries: B1' (deduplicated) and B2's logged decisions.

A fake broker and store stand in for PostgreSQL and S3: what is checked is what each agent asks of
them (which stage it enqueues, with which ack, which artifact it writes, which decision it logs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench import consumer as consumer_module
from bench.b2_sweep import sweep, sweep_mode
from bench.consumer import Consumer, original_of
from bench.metrics import RunRecord, summarize
from bench.paired import deviation
from bench.queue_db import Message
from bench.shared_rule import StageExecution
from bench.table1 import modes_in, pooled


@dataclass
class FakeDb:
    """What a consumer did: logged executions, enqueues (with their acks), decisions, acks."""

    logged: list[StageExecution] = field(default_factory=list)
    together: list[tuple[str | None, str]] = field(default_factory=list)  # (stage, message acked) in one step
    enqueued: list[str] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    decisions: dict[tuple[str, str, int], tuple[str, str]] = field(default_factory=dict)

    def log(self, mode: str, execution: StageExecution) -> None:
        self.logged.append(execution)

    def enqueue_and_ack(self, message: Message, stage: str | None, body: dict[str, Any], end_uri: str = "") -> None:
        self.together.append((stage, body["uri"]))
        self.acked.append(message.id)

    def enqueue(self, mode: str, run_id: str, input_id: str, replay: int, workload: str, stage: str, body: Any) -> None:
        self.enqueued.append(stage)

    def ack(self, message: Message) -> None:
        self.acked.append(message.id)

    def finish(self, mode: str, run_id: str, stage: str, uri: str = "") -> None:
        self.enqueued.append("end")

    def decision(self, mode: str, run_id: str, stage: str, hop: int) -> str | None:
        found = self.decisions.get((run_id, stage, hop))
        return None if found is None else found[0]

    def record_decision(self, mode: str, run_id: str, stage: str, hop: int, choice: str, source: str) -> None:
        self.decisions.setdefault((run_id, stage, hop), (choice, source))


class FakeStore:
    """Write-once JSON by key, as the artifact store."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {"in": json.dumps({"route": "b", "input": "w1-0001"}).encode()}

    def uri(self, key: str) -> str:
        return key

    def read_json(self, uri: str) -> Any:
        return json.loads(self.objects[uri])

    def stored_or_none(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def put_json_once(self, key: str, document: Any) -> Any:
        self.objects.setdefault(key, json.dumps(document).encode())
        return type("Stored", (), {"uri": key})()


def delivery(
    stage: str, deliveries: int = 1, *, run_id: str = "b1p-t-w1-0001", uri: str = "in", hops: int = 0
) -> Message:
    mode = run_id.split("-", 1)[0]
    replay = int(run_id.rsplit(".replay-", 1)[1]) if ".replay-" in run_id else 0
    return Message(7, mode, run_id, "w1-0001", replay, "W1", stage, {"uri": uri, "hops": hops}, deliveries)


def agent(mode: str, db: FakeDb, store: FakeStore, share: float = 0.0) -> Consumer:
    return Consumer(db, store, mode, f"{mode}-consumer-0", seed=1, share=share)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def no_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_module, "draw", lambda *args: None)


def test_b1_prime_writes_its_stage_s_own_key_and_enqueues_with_the_ack() -> None:
    db, store = FakeDb(), FakeStore()
    agent("b1p", db, store).handle(delivery("A"))
    [execution] = db.logged
    assert execution.wrote_uri == "artifacts/bench-b1p/b1p-t-w1-0001/A/output.json" and execution.read_uri == "in"
    assert db.together == [("B", execution.wrote_uri)] and db.acked == [7] and db.enqueued == []


def test_b1_prime_skips_a_delivery_whose_output_exists() -> None:
    # A crash after the work left A's output and no ack: the redelivery runs no agent.
    db, store = FakeDb(), FakeStore()
    agent("b1p", db, store).handle(delivery("A"))
    again = FakeDb()
    agent("b1p", again, store).handle(delivery("A", deliveries=2))
    assert again.logged == [] and again.together == [("B", "artifacts/bench-b1p/b1p-t-w1-0001/A/output.json")]


def test_b1_prime_crashes_before_its_one_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_module, "draw", lambda *args: "crash")

    def died() -> None:  # the consumer SIGKILLs itself there; in a test, the call stops instead
        raise SystemExit(-9)

    monkeypatch.setattr(consumer_module, "kill_self", died)
    db, store = FakeDb(), FakeStore()
    with pytest.raises(SystemExit):
        agent("b1p", db, store).handle(delivery("A"))
    assert len(db.logged) == 1 and db.together == [] and db.acked == []  # worked; nothing enqueued or acked


def test_b1_keys_are_new_every_time_and_it_enqueues_apart_from_the_ack() -> None:
    db, store = FakeDb(), FakeStore()
    agent("b1", db, store).handle(delivery("A", run_id="b1-t-w1-0001"))
    agent("b1", db, store).handle(delivery("A", deliveries=2, run_id="b1-t-w1-0001"))
    first, second = db.logged
    assert first.wrote_uri != second.wrote_uri and db.enqueued == ["B", "B"] and db.together == []


def deviating_input(share: float) -> str:
    """An input whose B2 agent deviates at A on its original and not on replay 1 (a fresh draw)."""
    for n in range(500):
        input_id = f"w1-{n:04d}"
        if (
            deviation(1, input_id, 0, "A", 0, share, 2) is not None
            and deviation(1, input_id, 1, "A", 0, share, 2) is None
        ):
            return input_id
    raise AssertionError("no such input")


def test_b2_logs_its_decisions_and_its_replays_take_them() -> None:
    input_id = deviating_input(0.5)
    db, store = FakeDb(), FakeStore()
    b2 = agent("b2", db, store, share=0.5)
    original = Message(1, "b2", f"b2-t-{input_id}", input_id, 0, "W1", "A", {"uri": "in", "hops": 0}, 1)
    b2.handle(original)
    choice, source = db.decisions[(original.run_id, "A", 0)]
    assert source == "drawn" and choice != "B"  # an alternative: skip to C, or stop ("")
    replayed = Message(2, "b2", f"{original.run_id}.replay-1", input_id, 1, "W1", "A", {"uri": "in", "hops": 0}, 1)
    b2.handle(replayed)
    # A fresh draw would have followed the graph; the replay took the logged decision instead.
    assert db.decisions[(replayed.run_id, "A", 0)] == (choice, "replayed")
    # Where its original decided nothing (here: B), a replay draws, and logs that it did.
    at_b = Message(3, "b2", replayed.run_id, input_id, 1, "W1", "B", {"uri": "in", "hops": 1}, 1)
    b2.handle(at_b)
    assert db.decisions[(replayed.run_id, "B", 1)][1] == "drawn"
    assert original_of(replayed.run_id) == original.run_id and original_of("b2-x") == "b2-x"


def test_the_sweep_shows_b2_at_each_share_and_old_results_lack_b1_prime() -> None:
    def made(success: bool) -> dict[str, Any]:
        records = [RunRecord("r", "i", False, path=["A"], success=success)]
        return {"summary": summarize(records, 60.0), "records": [vars(r) for r in records]}

    workloads = {"W1": {"B3": made(True), "B1": made(True), "B2": made(True), "B2s30": made(False)}}
    results = {"workloads": workloads, "config": {"ambiguity": 0.15, "b2_sweep": [0.3]}}
    assert modes_in(workloads) == ("B3", "B1", "B2") and set(pooled(results, intervals=False)) == {"B3", "B1", "B2"}
    assert sweep_mode(0.05) == "B2s05"
    table = sweep(results)
    assert "| B2 at 15% | B2 at 30% |" in table and "| 1.000 | 0.000 |" in table
    assert sweep({"workloads": workloads, "config": {"ambiguity": 0.15}}) == ""
