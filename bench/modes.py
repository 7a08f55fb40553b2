"""The floors B3 is measured against: raw Temporal (plain workflows with no-op activities, no
artifacts, no audit), the same plus the artifact I/O of a DSMO run, and a bare signalled wait.

The baselines of Table 1 (B1, B2) run on a queue server instead: `queue_modes.py`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

from dsmo.activities.audit_log import chain
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.common.status import RunStatus

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

# -- the floor: raw Temporal --------------------------------------------------------------------


@activity.defn(name="noop")
async def noop() -> None:
    return None


@workflow.defn(name="FloorRun", sandboxed=False)
class FloorRun:
    @workflow.run
    async def run(self, activities: int) -> None:
        for _ in range(activities):
            await workflow.execute_activity("noop", start_to_close_timeout=timedelta(seconds=10))


@workflow.defn(name="FloorWait", sandboxed=False)
class FloorWait:
    """A bare wait: signal -> completion, the floor of resume latency."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.go)

    @workflow.signal
    def resume(self) -> None:
        self.go = True


# -- the floor plus artifact I/O ----------------------------------------------------------------


class FloorIoStage(BaseModel):
    run_id: str
    stage: str
    input_uri: str
    input_document: dict[str, Any] | None = None  # as DSMO sends a small run input with the task


@workflow.defn(name="FloorIoRun", sandboxed=False)
class FloorIoRun:
    """The floor plus the S3 requests a DSMO run makes, and nothing else.

    The starter writes the input first. The first stage gets that input with its task, as DSMO
    sends a small run input, and later stages read their input by reference; each writes its
    output write-once, on thread-pool activities like DSMO's stages and through the same store
    (so the same cache); a local activity at the end writes a trail file, as DSMO's audit export
    does. No definition, no audit events, no saga: what B3 costs beyond this is the
    orchestration itself.

    With ``visible``, the run also carries the search attributes DSMO's contract has every run
    keep (set at start by the starter, the final status upserted at the end as DSMO does), so
    their cost to the server is told apart from the rest of the orchestration's.

    With ``local``, the stages run as local activities (the same work, in the workflow's own
    task): the floor DSMO's local stages are measured against.
    """

    @workflow.run
    async def run(
        self,
        run_id: str,
        input_uri: str,
        stages: int,
        input_document: dict[str, Any],
        visible: bool = False,
        local: bool = False,
    ) -> None:
        uris, uri = [], input_uri
        document: dict[str, Any] | None = input_document
        execute = workflow.execute_local_activity if local else workflow.execute_activity
        for index in range(stages):
            uri = await execute(
                "floor_io_stage",
                FloorIoStage(run_id=run_id, stage=chr(ord("A") + index), input_uri=uri, input_document=document),
                result_type=str,
                start_to_close_timeout=timedelta(seconds=10),
            )
            uris.append(uri)
            document = None
        if visible:
            workflow.upsert_search_attributes(
                [
                    sa.AGENT_EXECUTION_STATUS.value_set(RunStatus.COMPLETED.value),
                    sa.WAITING_FOR.value_unset(),
                    sa.WAITING_UNTIL.value_unset(),
                ]
            )
        await workflow.execute_local_activity(
            "floor_io_trail", args=[run_id, uris], start_to_close_timeout=timedelta(seconds=10)
        )


@dataclass
class FloorIoActivities:
    store: Any

    @activity.defn(name="floor_io_stage")
    def stage(self, task: FloorIoStage) -> str:
        document = task.input_document if task.input_document is not None else self.store.read_json(task.input_uri)
        output = {"stage": task.stage, "route": document.get("route", "b"), "digest": uuid.uuid4().hex[:16]}
        return str(self.store.put_json_once(f"artifacts/bench-floor-io/{task.run_id}/{task.stage}.json", output).uri)

    @activity.defn(name="floor_io_trail")
    def trail(self, run_id: str, uris: list[str]) -> None:
        # Hash-chained like DSMO's export, so the floor pays for building the file as well.
        body = chain([{"seq": seq, "artifact": uri} for seq, uri in enumerate(uris, start=1)])
        self.store.put_json_bytes_once(
            f"audit/bench-floor-io/{run_id}.jsonl", body, content_type="application/x-ndjson"
        )
