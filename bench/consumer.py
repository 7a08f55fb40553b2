"""A B1, B1' or B2 agent process: a competing consumer of the queue (`python -m bench.consumer`).

It takes a stage message, runs the stage's agent (reads the input artifact, writes the output
artifact, logs the execution with what it read and wrote), enqueues the next stage itself, then
acknowledges. B1's agent enqueues the graph's next stage; B2's agent names it, and in a seeded
share of runs it picks a real alternative at a decision (another branch, skipping a stage,
stopping early). B2 logs every decision; its replays take the original's logged decisions, and
draw anew only where the original made none. B1' is a competent choreography: its output keys
are deterministic ((run, stage)), a delivery whose output exists skips the work, and it enqueues
the next stage once per (run, stage) in the transaction that deletes its message.

Faults come from `bench.paired`: a crash SIGKILLs this process after the work (B1, B2: between
the enqueue and the ack; B1': before its one transaction), and the bench's supervisor starts
another a second later, as it does B3's worker (`bench.supervisor`); a lost ack leaves the message to be
redelivered, a slow attempt outlives the visibility timeout, a transient failure is retried
after a back-off, a permanent one goes to the dead letters. A message delivered more than
`MAX_ATTEMPTS` times goes to the dead letters too. When the queue's server restarts (W3 and W4,
mid-workload), the consumer drops the message in hand (it is redelivered), waits and goes on.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
import uuid
from typing import Any

import psycopg

from bench.agents import DIE, REPLAY_MARK, SLOW_S, after_work, kill_self, output_of
from bench.paired import MAX_ATTEMPTS, RATES, alternatives, deviation, draw, fault_key, trajectory, valid_next
from bench.queue_db import Message, QueueDb
from bench.shared_rule import OK, ROOT, StageExecution
from dsmo.activities.artifacts import ArtifactStore
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store

MAX_HOPS = 8  # a guard: no chain runs more than 8 stages
IDLE_S = 0.01
SERVER_AWAY_S = 0.2  # between tries while the queue's server restarts


DEDUPLICATED = "b1p"  # B1'


def decides(mode: str) -> bool:
    """Whether the mode's agent names the next stage itself: B2 and its share sweep (``b2s05``)."""
    return mode.startswith("b2")


def next_stage(mode: str, message: Message, route: str, seed: int, share: float) -> str | None:
    """B1: the graph's next stage. B2: the agent's choice, an alternative in a seeded share of runs."""
    correct = valid_next(message.workload, message.stage, route)
    if not decides(mode):
        return correct
    options = alternatives(message.workload, message.stage, route)
    decisions = len(trajectory(message.workload, route)) - 1
    hop = int(message.body.get("hops", 0))
    roll = deviation(seed, message.input_id, message.replay, message.stage, hop, share, decisions) if options else None
    return correct if roll is None else options[int(roll * len(options))]


def original_of(run_id: str) -> str:
    """The original run of a replay (``<original>.replay-<n>``), or ``run_id`` itself."""
    return run_id.rsplit(REPLAY_MARK, 1)[0]


class Consumer:
    """One agent process of one mode."""

    def __init__(self, db: QueueDb, store: ArtifactStore, mode: str, name: str, seed: int, share: float) -> None:
        self.db, self.store, self.mode, self.name, self.seed, self.share = db, store, mode, name, seed, share
        self.stopping = False

    def serve(self) -> None:
        """Take and handle messages until told to stop."""
        while not self.stopping:
            try:
                message = self.db.receive(self.mode)
                if message is None:
                    time.sleep(IDLE_S)
                    continue
                self.handle(message)
            except psycopg.OperationalError:
                # The server went away (a restart): what was not committed is redelivered.
                self.db.reset()
                time.sleep(SERVER_AWAY_S)

    def handle(self, message: Message) -> None:
        """One delivery: draw its fault, run the agent, enqueue what follows, acknowledge."""
        if message.deliveries > MAX_ATTEMPTS:
            self.db.dead_letter(message, f"delivered {message.deliveries} times")
            return
        found = self.existing(message) if self.mode == DEDUPLICATED else None
        if found is not None:  # B1': an earlier delivery did the work; like B3's reuse, no agent runs
            hops = int(message.body.get("hops", 0)) + 1
            following = self.decide(message, str(found["route"])) if hops < MAX_HOPS else None
            body = {"uri": found["uri"], "hops": hops, "parent": f"{message.id}.{message.deliveries}"}
            self.db.enqueue_and_ack(message, following, body, end_uri=str(found["uri"]))
            return
        fault = draw(RATES[message.workload], self.seed, message.input_id, message.stage, message.deliveries)
        started = time.time()
        exec_id = f"{message.id}.{message.deliveries}"  # one per delivery: a redelivery is another execution

        def record(outcome: str, wrote: str = "") -> None:
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
                fault_key=fault_key(message.input_id, message.stage, message.deliveries),
                read_uri=str(message.body["uri"]),
                wrote_uri=wrote,
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
        record(OK, str(output["uri"]))
        following = self.decide(message, str(output["route"]))
        hops = int(message.body.get("hops", 0)) + 1
        if self.mode == DEDUPLICATED:
            self.deduplicated(message, fault, following if hops < MAX_HOPS else None, output, exec_id, hops)
            return
        if following is None or hops >= MAX_HOPS:
            self.db.finish(self.mode, message.run_id, message.stage, str(output["uri"]))  # this chain ends here
        else:
            body = {"uri": output["uri"], "hops": hops, "parent": exec_id}
            self.db.enqueue(
                self.mode, message.run_id, message.input_id, message.replay, message.workload, following, body
            )
        if after_work(fault) == DIE:
            kill_self()  # between the enqueue and the ack: the message will be redelivered
        if fault == "lost_ack":
            return
        self.db.ack(message)

    def deduplicated(
        self,
        message: Message,
        fault: str | None,
        following: str | None,
        output: dict[str, Any],
        exec_id: str,
        hops: int,
    ) -> None:
        """B1''s end of a delivery: one transaction enqueues the next stage once and deletes the
        message; a crash or a lost ack before it leaves the message to be redelivered."""
        if after_work(fault) == DIE:
            kill_self()  # after the work, before the transaction: nothing enqueued, no ack
        if fault == "lost_ack":
            return  # the transaction never committed
        body = {"uri": output["uri"], "hops": hops, "parent": exec_id}
        self.db.enqueue_and_ack(message, following, body, end_uri=str(output["uri"]))

    def decide(self, message: Message, route: str) -> str | None:
        """The stage after this one. B2 logs each decision; a replay takes its original's."""
        if not decides(self.mode) or not alternatives(message.workload, message.stage, route):
            return next_stage(self.mode, message, route, self.seed, self.share)
        hop = int(message.body.get("hops", 0))
        if message.replay:
            recorded = self.db.decision(self.mode, original_of(message.run_id), message.stage, hop)
            if recorded is not None:
                self.db.record_decision(self.mode, message.run_id, message.stage, hop, recorded, "replayed")
                return recorded or None
        choice = next_stage(self.mode, message, route, self.seed, self.share)
        self.db.record_decision(self.mode, message.run_id, message.stage, hop, choice or "", "drawn")
        return choice

    def key(self, message: Message) -> str:
        """The output's key: B1''s is the (run, stage)'s own; B1's and B2's are new every time."""
        unique = "output" if self.mode == DEDUPLICATED else uuid.uuid4().hex
        return f"artifacts/bench-{self.mode}/{message.run_id}/{message.stage}/{unique}.json"

    def existing(self, message: Message) -> dict[str, Any] | None:
        """B1': the stage's output, if an earlier delivery wrote it (the work is then skipped)."""
        key = self.key(message)
        stored = self.store.stored_or_none(key)
        return None if stored is None else {**json.loads(stored), "uri": self.store.uri(key)}

    def work(self, message: Message) -> dict[str, Any]:
        """The stage's agent: read the input artifact, write the output artifact."""
        document = self.store.read_json(message.body["uri"])
        output = output_of(document, message.stage)
        return {**output, "uri": self.store.put_json_once(self.key(message), output).uri}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.consumer")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--mode", required=True, help="b1, b1p (B1'), b2, or b2sNN (B2 at NN%%)")
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
