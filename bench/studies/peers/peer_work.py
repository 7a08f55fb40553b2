"""The agents every contender runs: the same functions, the same artifacts, the same ledger rows.

A stage reads its input artifact, derives its output and writes it write-once to the store; the
send applies the run's one effect. Each writes the ledger before and after its work, and kills
its own process where the fault plan says (once per run and stage: the ledger keeps the kill).
DSMO reads and writes the artifacts itself around its processors, so its agents call `derive`
and `effect` with the documents, and the store requests are the same.
"""

from __future__ import annotations

import hashlib
import os
import signal
from dataclasses import dataclass
from typing import Any

from bench.studies.peers.fault_plan import FaultPlan
from bench.studies.peers.peer_ledger import DONE, EFFECT, KILL, START, Ledger
from dsmo.activities.artifacts import ArtifactStore


def output_of(document: dict[str, Any], stage: str) -> dict[str, Any]:
    """A stage's output: its input's identity carried forward, with a digest of the stage's work."""
    digest = hashlib.sha256(f"{stage}|{document.get('input', '')}".encode()).hexdigest()[:16]
    return {"input": document.get("input", ""), "stage": stage, "digest": digest}


@dataclass
class PeerWork:
    """One runner process's agents."""

    ledger: Ledger
    plan: FaultPlan
    store: ArtifactStore | None = None

    def stage(self, run_id: str, stage: str, input_uri: str) -> str:
        """Run ``stage`` on the artifact at ``input_uri``; the output artifact's URI."""
        assert self.store is not None, "a contender that moves its own artifacts has a store"
        self.begin(run_id, stage)
        output = output_of(self.store.read_json(input_uri), stage)
        key = f"artifacts/peers/{self.ledger.contender}/{run_id}/{stage}.json"
        uri = str(self.store.put_json_once(key, output).uri)
        self.finish(run_id, stage)
        return uri

    def send(self, run_id: str, input_uri: str, ended_by: str, *, key: str) -> None:
        """Apply the run's effect (the message the graph ends with), said to follow ``ended_by``.

        ``key`` is the engine's documented idempotency key for this send: the effect goes to the
        plain ledger (no key) and to the receiver that dedupes by it.
        """
        assert self.store is not None, "a contender that moves its own artifacts has a store"
        self.begin(run_id, "send")
        self.store.read_json(input_uri)
        self._apply(run_id, ended_by, key)

    def derive(self, run_id: str, stage: str, document: dict[str, Any]) -> dict[str, Any]:
        """A stage for a contender that reads and writes the artifacts itself (DSMO)."""
        self.begin(run_id, stage)
        output = output_of(document, stage)
        self.finish(run_id, stage)
        return output

    def effect(self, run_id: str, ended_by: str, *, key: str) -> None:
        """The send for a contender that reads its input itself (DSMO)."""
        self.begin(run_id, "send")
        self._apply(run_id, ended_by, key)

    def _apply(self, run_id: str, ended_by: str, key: str) -> None:
        self.ledger.write(run_id, "send", EFFECT, ended_by)
        self.ledger.receive(f"{self.ledger.contender}/{key}", run_id, ended_by)
        self.finish(run_id, "send")

    def begin(self, run_id: str, stage: str) -> None:
        self.ledger.write(run_id, stage, START)
        self._maybe_kill(run_id, stage, "during")

    def finish(self, run_id: str, stage: str) -> None:
        self.ledger.write(run_id, stage, DONE)
        self._maybe_kill(run_id, stage, "after")

    def _maybe_kill(self, run_id: str, stage: str, point: str) -> None:
        if self.plan.kill_at(run_id, stage, point) and not self.ledger.killed_before(run_id, stage):
            self.ledger.write(run_id, stage, KILL, point)
            os.kill(os.getpid(), signal.SIGKILL)
