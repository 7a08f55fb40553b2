"""A B1 or B2 agent process: a competing consumer of the queue (`python -m bench.consumer`).

It takes a stage message, runs the stage's agent (reads the input artifact, writes the output
artifact, logs the execution), enqueues the next stage itself, then acknowledges. B1's agent
enqueues the graph's next stage; B2's agent names it, and in a seeded share of runs it picks a
real alternative at a decision (another branch, skipping a stage, stopping early). Every message
carries the id of the execution that enqueued it, which the agent logs as its parent: the
lineage the shared rule follows. Faults come from `bench.paired`: a crash kills this process
between the enqueue and the ack (the bench starts another), a lost ack leaves the message to
be redelivered, a slow attempt outlives the visibility timeout, a transient failure is retried
after a back-off, a permanent one goes to the dead letters. A message delivered more than
`MAX_ATTEMPTS` times goes to the dead letters too.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
import uuid
from typing import Any

from bench.agents import SLOW_S, output_of
from bench.paired import MAX_ATTEMPTS, RATES, alternatives, deviation, draw, fault_key, trajectory, valid_next
from bench.queue_db import Message, QueueDb
from bench.shared_rule import OK, ROOT, StageExecution
from dsmo.activities.artifacts import ArtifactStore
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store

CRASH_EXIT = 17
MAX_HOPS = 8  # a guard: no chain runs more than 8 stages
IDLE_S = 0.01


def next_stage(mode: str, message: Message, route: str, seed: int, share: float) -> str | None:
    """B1: the graph's next stage. B2: the agent's choice, an alternative in a seeded share of runs."""
    correct = valid_next(message.workload, message.stage, route)
    if mode != "b2":
        return correct
    options = alternatives(message.workload, message.stage, route)
    decisions = len(trajectory(message.workload, route)) - 1
    hop = int(message.body.get("hops", 0))
    roll = deviation(seed, message.input_id, message.replay, message.stage, hop, share, decisions) if options else None
    return correct if roll is None else options[int(roll * len(options))]


class Consumer:
    """One agent process of one mode."""

    def __init__(self, db: QueueDb, store: ArtifactStore, mode: str, name: str, seed: int, share: float) -> None:
        self.db, self.store, self.mode, self.name, self.seed, self.share = db, store, mode, name, seed, share
        self.stopping = False

    def serve(self) -> None:
        """Take and handle messages until told to stop."""
        while not self.stopping:
            message = self.db.receive(self.mode)
            if message is None:
                time.sleep(IDLE_S)
                continue
            self.handle(message)

    def handle(self, message: Message) -> None:
        """One delivery: draw its fault, run the agent, enqueue what follows, acknowledge."""
        if message.deliveries > MAX_ATTEMPTS:
            self.db.dead_letter(message, f"delivered {message.deliveries} times")
            return
        fault = draw(
            RATES[message.workload], self.seed, message.input_id, message.replay, message.stage, message.deliveries
        )
        started = time.time()
        exec_id = f"{message.id}.{message.deliveries}"  # one per delivery: a redelivery is another execution

        def record(outcome: str) -> None:
            execution = StageExecution(
                message.run_id,
                message.stage,
                message.deliveries,
                self.name,
                outcome,
                started,
                time.time(),
                exec_id=exec_id,
                parent=str(message.body.get("parent", ROOT)),
                fault=fault or "",
                fault_key=fault_key(message.input_id, message.replay, message.stage, message.deliveries),
            )
            self.db.log(self.mode, execution)

        if fault == "transient":
            record("transient")
            self.db.retry_later(message)
            return
        if fault == "permanent":
            record("permanent")
            self.db.dead_letter(message, "permanent failure")
            return
        if fault == "slow":
            time.sleep(SLOW_S)  # the message is visible again: another consumer takes it meanwhile
        output = self.work(message)
        record(OK)
        following = next_stage(self.mode, message, str(output["route"]), self.seed, self.share)
        hops = int(message.body.get("hops", 0)) + 1
        if following is None or hops >= MAX_HOPS:
            self.db.finish(self.mode, message.run_id, message.stage)  # this chain ends here
        else:
            body = {"uri": output["uri"], "hops": hops, "parent": exec_id}
            self.db.enqueue(
                self.mode, message.run_id, message.input_id, message.replay, message.workload, following, body
            )
        if fault == "crash":
            os._exit(CRASH_EXIT)  # between the enqueue and the ack: the message will be redelivered
        if fault == "lost_ack":
            return
        self.db.ack(message)

    def work(self, message: Message) -> dict[str, Any]:
        """The stage's agent: read the input artifact, write the output artifact."""
        document = self.store.read_json(message.body["uri"])
        output = output_of(document, message.stage)
        key = f"artifacts/bench-{self.mode}/{message.run_id}/{message.stage}/{uuid.uuid4().hex}.json"
        return {**output, "uri": self.store.put_json_once(key, output).uri}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.consumer")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--mode", choices=("b1", "b2"), required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--ambiguity", type=float, default=0.0)
    args = parser.parse_args()
    store = artifact_store(Settings.from_env(), cache=True)
    consumer = Consumer(QueueDb(args.dsn), store, args.mode, args.name, args.seed, args.ambiguity)

    def stop(*_: Any) -> None:
        consumer.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    consumer.serve()


if __name__ == "__main__":
    main()
