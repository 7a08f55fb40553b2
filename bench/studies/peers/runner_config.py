"""What a runner process is told by the driver, through its environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench.studies.peers.fault_plan import FaultPlan
from bench.studies.peers.peer_ledger import Ledger
from bench.studies.peers.peer_work import PeerWork
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store

# The lines of user code a contender's graph took are counted between these markers.
USER_CODE_BEGIN, USER_CODE_END = "# -- user code begins --", "# -- user code ends --"

# Stage executions one runner runs at once in the crash test, the same for every contender, so a
# SIGKILL finds as much work in flight in each: DSMO's worker and the raw Temporal worker have as
# many activity slots (in every phase), LangGraph's runner as many job slots, DBOS's stages go
# through a queue with this `worker_concurrency`.
STAGE_SLOTS = 16


@dataclass(frozen=True)
class RunnerConfig:
    contender: str
    ledger_dsn: str
    state_dsn: str
    plan_file: Path | None
    task_queue: str
    wait_seconds: float
    port: int
    # True in the crash test: the runner runs at most `STAGE_SLOTS` stage executions at once.
    capped: bool = False

    @classmethod
    def from_env(cls) -> RunnerConfig:
        plan = os.environ.get("PEERS_PLAN", "")
        return cls(
            contender=os.environ["PEERS_CONTENDER"],
            ledger_dsn=os.environ["PEERS_LEDGER_DSN"],
            state_dsn=os.environ.get("PEERS_STATE_DSN", ""),
            plan_file=Path(plan) if plan else None,
            task_queue=os.environ.get("PEERS_TASK_QUEUE", "peers"),
            wait_seconds=float(os.environ.get("PEERS_WAIT_S", "60")),
            port=int(os.environ.get("PEERS_PORT", "0")),
            capped=os.environ.get("PEERS_CAPPED", "") == "1",
        )

    def to_env(self) -> dict[str, str]:
        return {
            "PEERS_CONTENDER": self.contender,
            "PEERS_LEDGER_DSN": self.ledger_dsn,
            "PEERS_STATE_DSN": self.state_dsn,
            "PEERS_PLAN": str(self.plan_file or ""),
            "PEERS_TASK_QUEUE": self.task_queue,
            "PEERS_WAIT_S": str(self.wait_seconds),
            "PEERS_PORT": str(self.port),
            "PEERS_CAPPED": "1" if self.capped else "",
        }

    def work(self, *, with_store: bool = True) -> PeerWork:
        store = artifact_store(Settings.from_env()) if with_store else None
        return PeerWork(Ledger(self.ledger_dsn, self.contender), FaultPlan.load(self.plan_file), store)
