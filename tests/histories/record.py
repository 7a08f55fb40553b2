"""Record golden histories of the examples: `make golden` (needs the embedded stack).

Each file is `{"workflowId": ..., "history": <Temporal's history JSON>}`;
`tests/unit/test_golden_histories.py` replays them on the current code in every CI run, so a
change that would break runs in flight fails CI. Add a history when you add a feature whose runs
may be in flight during a deploy; never regenerate an existing one to make a failing replay pass
(use `workflow.patched` instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import dsmo_examples  # noqa: F401 - registers the example agents the flows run
from bench.llm_server import ChatServer, Reply
from dsmo.activities.actions import FunctionAction
from dsmo.activities.definition_store import DefinitionStore
from dsmo.activities.llm_stage import LlmEndpoint
from dsmo.activities.messaging import FileChannel
from dsmo.client.definition_files import load_definition
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store, s3_client
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from dsmo_examples.orders.db import OrderDatabase
from dsmo_examples.orders.order_steps import order_actions

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"


async def screening(dsmo: DsmoClient, queue: str) -> str:
    run_id = (
        await dsmo.start(
            load_definition(EXAMPLES / "candidate_screening.yaml"),
            {"candidate": {"name": "Golden", "phone": "+34 600"}},
            task_queue=queue,
        )
    ).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "sí", event_id="golden-1")
    await dsmo.result(run_id)
    return run_id


async def triage(dsmo: DsmoClient, queue: str) -> str:
    text = "ACME\\nInvoice 1\\nTotal due: 10.00 EUR\\nbilling@acme.example"
    run_id = (
        await dsmo.start(load_definition(EXAMPLES / "triage.yaml"), {"document": {"text": text}}, task_queue=queue)
    ).run_id
    await dsmo.result(run_id)
    return run_id


async def saga_failure(dsmo: DsmoClient, queue: str) -> str:
    order = {
        "order": {
            "customer": "g",
            "productId": "lamp",
            "quantity": 1,
            "amount": 5.0,
            "card": "4000 0000 0000 0002",
            "address": "x",
        }
    }
    run_id = (await dsmo.start(load_definition(EXAMPLES / "order_saga.yaml"), order, task_queue=queue)).run_id
    await dsmo.result(run_id)
    return run_id


async def onboarding(dsmo: DsmoClient, queue: str) -> str:
    run_id = (
        await dsmo.start(
            load_definition(EXAMPLES / "onboarding.yaml"),
            {"candidate": {"id": "g1", "name": "G", "phone": "1", "email": "g@example.com"}},
            task_queue=queue,
        )
    ).run_id
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("response", "MESSAGE_RECEIVED", {"text": "ok"}),
        ("document", "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/1"}),
        ("document", "DOCUMENT_UPLOADED", {"document": "diploma", "url": "s3://d/2"}),
        ("signature", "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://d/s", "signedAt": "2026-01-01T00:00:00Z"}),
        ("test", "TEST_COMPLETED", {"score": 90, "result": "passed"}),
        ("event", "EVENT_COMPLETED", {"result": "attended"}),
    ]
    for index, (kind, event_type, data) in enumerate(steps):
        view = await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        while view.waiting_for != kind:
            await asyncio.sleep(0.1)
            view = await dsmo.status(run_id)
        await dsmo.deliver_event(run_id, event_type, data, event_id=f"golden-{index}")
    view = await dsmo.wait_for_status(run_id, {RunStatus.WAITING}, timeout=60)
    while view.waiting_for != "agent":
        await asyncio.sleep(0.2)
        view = await dsmo.status(run_id)
    child = str((view.waiting_data or {})["childExecutionId"])
    await dsmo.wait_for_status(child, {RunStatus.WAITING})
    await dsmo.respond(child, "clean", event_id="golden-child")
    await dsmo.result(run_id)
    return run_id


async def replayed_onboarding(dsmo: DsmoClient, queue: str) -> str:
    """A replay (dsmo replay) of a completed onboarding run: every wait kind, the delay and the
    child taken from the original's record."""
    from dsmo.client import replay as replays

    original = await onboarding(dsmo, queue)
    report = await replays.replay(dsmo.core, artifact_store(dsmo.settings), original, task_queue=queue)
    return report.replay


async def replayed_saga(dsmo: DsmoClient, queue: str) -> str:
    """A replay of an order saga whose payment was declined (before replays took actions'
    outcomes from the record, they ran the actions again)."""
    from dsmo.client import replay as replays

    original = await saga_failure(dsmo, queue)
    report = await replays.replay(dsmo.core, artifact_store(dsmo.settings), original, task_queue=queue)
    return report.replay


async def strict_signal_refused(dsmo: DsmoClient, queue: str) -> str:
    """A screening run refusing a raw signal whose event id ends in a newline, then answered."""
    run_id = (
        await dsmo.start(
            load_definition(EXAMPLES / "candidate_screening.yaml"),
            {"candidate": {"name": "Golden", "phone": "+34 600"}},
            task_queue=queue,
        )
    ).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.temporal.get_workflow_handle(run_id).signal("MESSAGE_RECEIVED", {"event_id": "loose\n", "text": "x"})
    await dsmo.respond(run_id, "sí", event_id="golden-1")
    await dsmo.result(run_id)
    return run_id


async def raw_start_bad_run_id(dsmo: DsmoClient, queue: str) -> str:
    """Started around DSMO's checks with an id that is not a run id: it fails at once."""
    from dsmo.workflows.contracts.run_records import ExecutionRequest

    run_id = f"golden {uuid.uuid4().hex[:8]}"
    handle = await dsmo.temporal.start_workflow(
        "AgentExecution",
        ExecutionRequest(definition=load_definition(EXAMPLES / "triage.yaml"), input={"document": {"text": "x"}}),
        id=run_id,
        task_queue=queue,
    )
    try:
        await handle.result()
    except Exception:  # noqa: BLE001 - it is meant to fail
        return run_id
    raise AssertionError("the run with a bad id completed")


INBOX_CHAT = {
    "agent": "golden-inbox",
    "start": "greet",
    "nodes": {
        "greet": {"actionType": "send_message", "parameters": {"message": "hola"}, "next": "reply"},
        "reply": {
            "actionType": "wait_for_response",
            "parameters": {"threadId": "t-1", "match": "event.data.threadId == waitingData.threadId"},
            "next": "docs",
        },
        "docs": {"actionType": "request_document", "parameters": {"documents": ["id_card", "payslip"]}, "next": "meet"},
        "meet": {"actionType": "wait_for_event", "parameters": {"event": "interview"}},
    },
}


async def inbox_kept_and_consumed(dsmo: DsmoClient, queue: str) -> str:
    """Started with its first reply (update-with-start), a document kept while the reply is taken,
    a reply from another thread refused by match (a signal), the rest taken live or from the inbox."""
    from dsmo.workflows.definition.model import parse_definition

    first = {"type": "MESSAGE_RECEIVED", "event_id": "g-wrong", "data": {"text": "otro", "threadId": "t-2"}}
    run_id = (await dsmo.start(parse_definition(INBOX_CHAT), task_queue=queue, events=[first])).run_id
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://d/p"}, event_id="g-1")
    await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "g-2", "text": "x", "threadId": "t-9"})
    await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "sí", "threadId": "t-1"}, event_id="g-3")
    await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "done"}, event_id="g-4")
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, event_id="g-5")
    await dsmo.result(run_id)
    return run_id


LONG_CHAT = {
    "agent": "golden-long-chat",
    "start": "listen",
    "nodes": {
        "listen": {
            "actionType": "wait_for_event",
            "parameters": {"event": "message"},
            "transitions": [{"when": 'eventResult == "stop"', "to": "bye"}, {"to": "listen"}],
        },
        "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
    },
}


async def long_chat_segments(dsmo: DsmoClient, queue: str) -> tuple[str, str]:
    """A looping wait fed events larger than the trail keeps inline, through continue-as-new:
    its first generation stores event variables by reference and writes a trail segment."""
    from dsmo.workflows.definition.model import parse_definition

    run_id = (await dsmo.start(parse_definition(LONG_CHAT), task_queue=queue, history_limit=30)).run_id
    first = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    for index in range(6):
        data = {"result": "said", "data": {"notes": "n" * 5000}}
        await dsmo.deliver_event(run_id, "EVENT_COMPLETED", data, event_id=f"g-{index}")
    await dsmo.deliver_event(run_id, "EVENT_COMPLETED", {"result": "stop"}, event_id="g-stop")
    await dsmo.result(run_id)
    return run_id, first


MOVING = {
    "agent": "golden-moving",
    "version": "1",
    "start": "documents",
    "nodes": {
        "documents": {
            "actionType": "request_document",
            "parameters": {"documents": ["id_card", "payslip"]},
            "next": "sign",
        },
        "sign": {"actionType": "request_signature", "parameters": {"document": "s3://c"}, "next": "bye"},
        "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
    },
}
# Version 2 renames `documents` and checks the papers before the signature.
MOVED = {
    **MOVING,
    "version": "2",
    "start": "papers",
    "nodes": {
        "papers": {**MOVING["nodes"]["documents"], "next": "check"},  # type: ignore[index]
        "check": {"actionType": "send_message", "parameters": {"message": "checking"}, "next": "sign"},
        "sign": MOVING["nodes"]["sign"],  # type: ignore[index]
        "bye": MOVING["nodes"]["bye"],  # type: ignore[index]
    },
}


async def _moved_run(dsmo: DsmoClient, queue: str) -> tuple[str, str]:
    """Waiting for documents (one in, a signature kept early), refused a move with no map, moved with one."""
    from dsmo.client.client_errors import MigrationNotAccepted
    from dsmo.workflows.definition.model import parse_definition

    v1, v2 = parse_definition(MOVING), parse_definition(MOVED)
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = (await dsmo.start(v1, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    first = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/i"}, event_id="g-1")
    await dsmo.deliver_event(run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://s"}, event_id="g-2")
    with contextlib.suppress(MigrationNotAccepted):  # no counterpart of `documents` unmapped: nothing written
        await dsmo.migrate_run(run_id, v2)
    await dsmo.migrate_run(run_id, v2, node_map={"documents": "papers"}, reason="golden", by="golden")
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "payslip", "url": "s3://d/p"}, event_id="g-3")
    await dsmo.result(run_id)
    return run_id, first


async def migrated_from(dsmo: DsmoClient, queue: str) -> tuple[str, str]:
    """The generation that took the move: a refused `migrate` (no trace), an accepted one, continue-as-new."""
    return await _moved_run(dsmo, queue)


async def migrated_to(dsmo: DsmoClient, queue: str) -> str:
    """The generation on the target version: RUN_MIGRATED, the kept signature taken, completed."""
    run_id, _ = await _moved_run(dsmo, queue)
    return run_id


async def migrated_restarting_timers(dsmo: DsmoClient, queue: str) -> str:
    """The generation a waiting run arrived in when moved with ``restart_timers``: its wait's
    timeout starts afresh, the reply is taken (code from before the fix timed the wait out at once)."""
    from dsmo.workflows.common.errors import DsmoError
    from dsmo.workflows.definition.model import parse_definition

    def asking(version: str, timeout: str) -> dict[str, Any]:
        return {
            "agent": agent,
            "version": version,
            "start": "ask",
            "nodes": {
                "ask": {"actionType": "wait_for_response", "parameters": {"timeout": timeout}, "next": "bye"},
                "bye": {"actionType": "send_message", "parameters": {"message": "got {{lastResponse}}"}},
            },
        }

    agent = f"golden-restarting-{uuid.uuid4().hex[:6]}"
    v1, v2 = parse_definition(asking("1", "1h")), parse_definition(asking("2", "2h"))
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = (await dsmo.start(v1, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.migrate_run(run_id, v2, restart_timers=True, reason="golden", by="golden")
    with contextlib.suppress(DsmoError):  # the code before the fix had ended the run already
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
        await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes"}, event_id="g-1")
    with contextlib.suppress(DsmoError):
        await dsmo.result(run_id)
    return run_id


async def forked_screening(dsmo: DsmoClient, queue: str) -> str:
    """A screening forked from its goodbye with a corrected reply: the profile reused, the wait
    answered from the record, live from the goodbye on (RUN_FORKED)."""
    original = await screening(dsmo, queue)
    fork = await dsmo.fork(original, "goodbye", set_variables={"lastResponse": "sí, confirmo"}, task_queue=queue)
    await dsmo.result(fork)
    return fork


async def forked_before_the_move(dsmo: DsmoClient, queue: str) -> tuple[str, str]:
    """A run moved to version 2 while it waited, forked from that wait: the fork's first
    generation, which replays the record up to the wait and goes live there (on the code before
    the fix, on version 1; since, it moves to version 2 there first)."""
    from dsmo.workflows.definition.model import parse_definition

    def asking(version: str) -> dict[str, Any]:
        return {
            "agent": agent,
            "version": version,
            "start": "ask",
            "nodes": {
                "ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "bye"},
                "bye": {"actionType": "send_message", "parameters": {"message": f"v{version}: {{{{lastResponse}}}}"}},
            },
        }

    agent = f"golden-forked-moved-{uuid.uuid4().hex[:6]}"
    v1, v2 = parse_definition(asking("1")), parse_definition(asking("2"))
    await dsmo.publish(v1)
    await dsmo.publish(v2)
    run_id = (await dsmo.start(v1, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.migrate_run(run_id, v2, reason="golden", by="golden")
    await dsmo.deliver_event(run_id, "MESSAGE_RECEIVED", {"text": "yes"}, event_id="g-1")
    await dsmo.result(run_id)
    fork = await dsmo.fork(run_id, "ask", task_queue=queue)
    await dsmo.wait_for_status(fork, {RunStatus.WAITING})
    await dsmo.deliver_event(fork, "MESSAGE_RECEIVED", {"text": "again"}, event_id="g-2")
    await dsmo.result(fork)
    handle = dsmo.temporal.get_workflow_handle(fork)
    last = await handle.fetch_history()
    began = last.events[0].workflow_execution_started_event_attributes
    return fork, began.continued_execution_run_id or (await handle.describe()).run_id


class GoldenHold:
    """A saga step for the rewound flows: done once per key, undone once per key."""

    name = "golden-hold"

    def execute(self, data: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"holdKey": ctx.key, "status": "active"}

    def compensate(self, output: dict[str, Any], ctx: Any) -> bool:
        return True

    def is_compensatable(self, output: dict[str, Any]) -> bool:
        return True


class GoldenSlowHold(GoldenHold):
    """A saga step that takes a while: a cancel lands while it runs."""

    name = "golden-slow-hold"

    def execute(self, data: dict[str, Any], ctx: Any) -> dict[str, Any]:
        time.sleep(2)
        return super().execute(data, ctx)


CANCELLED_MIDSTEP = {
    "agent": "golden-cancelled-midstep",
    "start": "hold",
    "nodes": {
        "hold": {"actionType": "invoke", "action": "golden-hold", "compensate": {"kind": "annulment"}, "next": "slow"},
        "slow": {
            "actionType": "invoke",
            "action": "golden-slow-hold",
            "compensate": {"kind": "annulment"},
            "next": "bye",
        },
        "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
    },
}


async def cancelled_during_a_step(dsmo: DsmoClient, queue: str) -> str:
    """A cancel while a saga step runs: on the code before the fix the run stopped waiting for it
    and undid only the step before (the slow one's effect landed, never undone); since, the run
    waits for the step, then undoes both."""
    from dsmo.workflows.common.errors import DsmoError

    run_id = (await dsmo.start(parse_definition(CANCELLED_MIDSTEP), task_queue=queue)).run_id
    for _ in range(200):
        if any(e.type == "STAGE_SUCCEEDED" for e in await dsmo.events(run_id, live=True)):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # the slow step is under way
    await dsmo.cancel(run_id, reason="golden")
    with contextlib.suppress(DsmoError):
        await dsmo.result(run_id)
    return run_id


REWINDING = {
    "agent": "golden-rewinding",
    "inputs": ["email"],
    "start": "documents",
    "nodes": {
        "documents": {
            "actionType": "request_document",
            "parameters": {"documents": ["id_card"], "to": "{{email}}"},
            "next": "hold",
        },
        "hold": {
            "actionType": "invoke",
            "action": "golden-hold",
            "input": {"for": "{{email}}"},
            "compensate": {"kind": "annulment"},
            "next": "sign",
        },
        "sign": {"actionType": "request_signature", "parameters": {"document": "s3://c"}, "next": "bye"},
        "bye": {"actionType": "send_message", "parameters": {"message": "bye"}},
    },
}


async def _rewound_run(dsmo: DsmoClient, queue: str) -> tuple[str, str]:
    """Waiting for a signature, sent back to its documents with a corrected address (the later
    hold undone), then completed."""
    from dsmo.workflows.definition.model import parse_definition

    run_id = (await dsmo.start(parse_definition(REWINDING), {"email": "wrong@example.com"}, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    first = (await dsmo.temporal.get_workflow_handle(run_id).describe()).run_id
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/1"}, event_id="g-1")
    while (await dsmo.status(run_id)).current_node != "sign":
        await asyncio.sleep(0.1)
    await dsmo.rewind(run_id, "documents", set_variables={"email": "right@example.com"}, reason="golden", by="golden")
    while (view := await dsmo.status(run_id)).current_node != "documents" or view.status is not RunStatus.WAITING:
        await asyncio.sleep(0.1)
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/2"}, event_id="g-2")
    while (await dsmo.status(run_id)).current_node != "sign":
        await asyncio.sleep(0.1)
    await dsmo.deliver_event(run_id, "SIGNATURE_COMPLETED", {"signedDocumentUrl": "s3://s"}, event_id="g-3")
    await dsmo.result(run_id)
    return run_id, first


async def rewound_from(dsmo: DsmoClient, queue: str) -> tuple[str, str]:
    """The generation that took the rewind: RUN_REWOUND, the hold undone, continue-as-new."""
    return await _rewound_run(dsmo, queue)


async def rewound_to(dsmo: DsmoClient, queue: str) -> str:
    """The generation that went back: its record re-executed up to the documents, then live."""
    run_id, _ = await _rewound_run(dsmo, queue)
    return run_id


KEYED_CHAT = {
    "agent": "golden-keyed-chat",
    "inputs": ["conversation"],
    "concurrency": [{"key": "{{conversation}}", "limit": 1, "holdWhileWaiting": False}],
    "start": "ask",
    "nodes": {
        "ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "bye"},
        "bye": {"actionType": "send_message", "parameters": {"message": "got {{lastResponse}}"}},
    },
}


async def keyed_chat(dsmo: DsmoClient, queue: str) -> str:
    """A run of a concurrency key: its slot claimed at start, given back while it waits, taken
    back in line when the reply comes, and given back when it ends."""
    from dsmo.workflows.definition.model import parse_definition

    report = (await dsmo.start(parse_definition(KEYED_CHAT), {"conversation": "g-1"}, task_queue=queue)).started
    await dsmo.wait_for_status(report.run_id, {RunStatus.WAITING})
    await dsmo.respond(report.run_id, "sí", event_id="golden-keyed-1")
    await dsmo.result(report.run_id)
    return report.run_id


async def key_locks_shard(dsmo: DsmoClient, queue: str) -> str:
    """A key lock's shard: one run's slot claimed at start, a second run in line, the slot handed
    on when the first ends, and given back when the second does."""
    from dsmo.workflows.definition.flow_control import lock_id, shard_of
    from dsmo.workflows.definition.model import parse_definition

    definition = parse_definition({**KEYED_CHAT, "agent": "golden-key-locks"})
    first = (await dsmo.start(definition, {"conversation": "g-2"}, task_queue=queue)).started
    second = (await dsmo.start(definition, {"conversation": "g-2"}, task_queue=queue)).started
    for report, reply in ((first, "golden-shard-1"), (second, "golden-shard-2")):
        await dsmo.wait_for_status(report.run_id, {RunStatus.WAITING})
        await dsmo.respond(report.run_id, "sí", event_id=reply)
        await dsmo.result(report.run_id)
    return shard_of(lock_id(definition.agent, "g-2", queue))[0]


async def key_locks_shard_replaced(dsmo: DsmoClient, queue: str) -> str:
    """A key lock's shard answering a start that replaces its line (`onBusy: cancel-previous`): a
    run holds the key, a second is in line, a third replaces both, goes first and takes the slot."""
    from dsmo.workflows.definition.flow_control import lock_id, shard_of
    from dsmo.workflows.definition.model import parse_definition

    queued, replacing = (
        parse_definition(
            {
                **KEYED_CHAT,
                "agent": "golden-key-replaced",
                "concurrency": [{"key": "{{conversation}}", "limit": 1, **on_busy}],  # held while waiting
            }
        )
        for on_busy in ({}, {"onBusy": "cancel-previous"})
    )
    holder = (await dsmo.start(queued, {"conversation": "g-3"}, task_queue=queue)).run_id
    await dsmo.wait_for_status(holder, {RunStatus.WAITING})
    in_line = (await dsmo.start(queued, {"conversation": "g-3"}, task_queue=queue)).run_id
    report = (await dsmo.start(replacing, {"conversation": "g-3"}, task_queue=queue)).started
    assert report.cancelled == [holder, in_line], report.cancelled
    await dsmo.wait_for_status(report.run_id, {RunStatus.WAITING})
    await dsmo.respond(report.run_id, "sí", event_id="golden-replaced-1")
    await dsmo.result(report.run_id)
    return shard_of(lock_id(queued.agent, "g-3", queue))[0]


async def throttle_bucket_ended_turn(dsmo: DsmoClient, queue: str) -> str:
    """A throttle's bucket (one start every 2 s): the first run passes at once, the second is
    cancelled while it waits, and its turn comes after it ended; then the third passes."""
    from dsmo.workflows.definition.flow_control import throttle_id
    from dsmo.workflows.definition.model import parse_definition

    agent = f"golden-throttle-{uuid.uuid4().hex[:6]}"
    definition = parse_definition(
        {
            "agent": agent,
            "throttle": {"limit": 1, "period": "2s"},
            "start": "hello",
            "nodes": {"hello": {"actionType": "send_message", "parameters": {"message": "hola"}}},
        }
    )
    first, second, third = [(await dsmo.start(definition, {}, task_queue=queue)).run_id for _ in range(3)]
    await dsmo.result(first)
    await dsmo.cancel(second, reason="golden: ended while it waited")
    await dsmo.result(second)
    await dsmo.result(third)
    return throttle_id(agent, "*")


def _subject_screening() -> Any:
    from dsmo.workflows.definition.model import AgentDefinition

    base = load_definition(EXAMPLES / "candidate_screening.yaml").model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return AgentDefinition.model_validate(
        {
            **base,
            "agent": "golden-subject-screening",
            "subject": "{{candidate.phone}}",
            "sensitive": ["stages.profile.summary.firstName", "lastResponse"],
            "retention": {"ended": "30d", "trail": "7y"},
        }
    )


async def subject_screening(dsmo: DsmoClient, queue: str) -> str:
    """A screening about a data subject: its keys learned at start, its data sealed, its sensitive
    values keyed, a retention marker written at its end."""
    run_id = (
        await dsmo.start(_subject_screening(), {"candidate": {"name": "Eva Ruiz", "phone": "+34600"}}, task_queue=queue)
    ).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "sí", event_id="golden-subject-1")
    await dsmo.result(run_id)
    return run_id


async def subject_raw_start(dsmo: DsmoClient, queue: str) -> str:
    """Started around DSMO's starter: the run learns its subject's keys (a local activity) and
    prepares its sealed input itself."""
    from dsmo.workflows.contracts.run_records import ExecutionRequest

    run_id = f"golden-subject-raw-{uuid.uuid4().hex[:6]}"
    request = ExecutionRequest(definition=_subject_screening(), input={"candidate": {"name": "Ana", "phone": "+34700"}})
    await dsmo.temporal.start_workflow("AgentExecution", request, id=run_id, task_queue=queue)
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "no", event_id="golden-subject-2")
    await dsmo.result(run_id)
    return run_id


async def retention_sweep(dsmo: DsmoClient, queue: str) -> str:
    """A retention sweep with nothing due as of its start (the store's markers lie ahead)."""
    from dsmo.workflows.contracts.retention_io import SWEEP_WORKFLOW, SweepOutcome
    from dsmo.workflows.lifecycle.retention_sweep import SweepStart

    run_id = f"golden-sweep-{uuid.uuid4().hex[:6]}"
    await dsmo.temporal.execute_workflow(
        SWEEP_WORKFLOW, SweepStart(), id=run_id, task_queue=queue, result_type=SweepOutcome
    )
    return run_id


# The model every recorded `llm` stage asks: a local chat server, scripted by the flow that uses it.
CHAT = ChatServer()


async def tool_loop_support(dsmo: DsmoClient, queue: str) -> str:
    """The tools guide's support agent: a lookup, a refund and the answer, each call recorded."""
    from tests.integration.llm.support_agent import TICKET, support

    CHAT.reply(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
        Reply(tool_calls=[("refund", {"order": "A-1", "amount": 42.5})]),
        Reply(content=json.dumps({"reply": "Refunded 42.50 for A-1"})),
    )
    definition = parse_definition(support("golden-support"))
    run_id = (await dsmo.start(definition, TICKET, task_queue=queue)).run_id
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    return run_id


async def tool_approval_edited(dsmo: DsmoClient, queue: str) -> str:
    """The support agent refunding 120 (over 50: it waits for approval), a person edits it to 60."""
    from tests.integration.llm.support_agent import support

    CHAT.reply(
        Reply(tool_calls=[("lookup_order", {"order": "B-7"})]),
        Reply(content="A full refund", tool_calls=[("refund", {"order": "B-7", "amount": 120})]),
        Reply(content=json.dumps({"reply": "Refunded 60.00 for B-7"})),
    )
    definition = parse_definition(support("golden-approval"))
    run_id = (await dsmo.start(definition, {"ticket": {"text": "broken TV", "order": "B-7"}}, task_queue=queue)).run_id
    handle = dsmo.run(run_id)
    await handle.wait_for_status({RunStatus.WAITING})
    await handle.decide("edit", arguments={"order": "B-7", "amount": 60}, reason="half", by="golden", call="think.v2#1")
    assert (await handle.result()).status is RunStatus.COMPLETED
    return run_id


async def tool_node_asked(dsmo: DsmoClient, queue: str) -> str:
    """A tool a node of the graph runs: the model asks the customer (a wait), then answers."""
    from tests.integration.llm.support_agent import TICKET, support

    CHAT.reply(
        Reply(tool_calls=[("ask_customer", {"question": "Which item?"})]),
        Reply(content=json.dumps({"reply": "Noted: the blender"})),
    )
    data = support("golden-node-tool")
    data["nodes"]["think"]["tools"].append(
        {
            "name": "ask_customer",
            "description": "Ask the customer and wait for the answer",
            "parameters": {"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}},
            "node": "ask",
        }
    )
    data["nodes"]["ask"] = {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}
    run_id = (await dsmo.start(parse_definition(data), TICKET, task_queue=queue)).run_id
    handle = dsmo.run(run_id)
    await handle.wait_for_status({RunStatus.WAITING})
    await handle.respond("the blender")
    assert (await handle.result()).status is RunStatus.COMPLETED
    return run_id


async def llm_plain(dsmo: DsmoClient, queue: str) -> str:
    """An `llm` node without tools: one answer, routed (its version hash is the one from before tools)."""
    CHAT.reply(Reply(content="A short answer"))
    definition = parse_definition(
        {
            "agent": "golden-plain-llm",
            "start": "ask",
            "nodes": {
                "ask": {"actionType": "llm", "prompt": "Say something", "transitions": [{"to": "tell"}]},
                "tell": {"actionType": "send_message", "parameters": {"message": "{{stages.ask.summary.text}}"}},
            },
        }
    )
    run_id = (await dsmo.start(definition, {}, task_queue=queue)).run_id
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    return run_id


def tool_actions() -> list[FunctionAction]:
    """The support agent's tools, answering as the guide's order service does."""
    return [
        FunctionAction(
            "lookup-order", lambda data, ctx: {"order": data["order"], "status": "delivered", "total": 42.5}
        ),
        FunctionAction("refund-order", lambda data, ctx: {"refunded": data["amount"], "order": data["order"]}),
    ]


SHORT_STAGES = {
    "agent": "golden-short-stages",
    "start": "check",
    "nodes": {
        "check": {
            "actionType": "run_agent",
            "agent": "golden-shaky",
            "timeout": "5s",
            "retry": {"maxAttempts": 3, "initialInterval": "200ms", "jitter": 0},
            "next": "reply",
        },
        "reply": {"actionType": "wait_for_response", "parameters": {"timeout": "7d"}, "next": "tidy"},
        "tidy": {"actionType": "run_agent", "agent": "golden-shaky", "timeout": "5s"},
    },
}
SHAKY_FAILED: set[str] = set()


def golden_shaky(document: Any, message: Any) -> Any:
    """Fails its first attempt at each node of a run (a transient error), then answers."""
    from dsmo.activities.processors import ProcessorOutput

    key = f"{message.run_id}/{message.stage}"
    if message.attempt == 1 and key not in SHAKY_FAILED:
        SHAKY_FAILED.add(key)
        raise ConnectionError("upstream unavailable")
    return ProcessorOutput(document={"checked": True}, summary={"ok": True})


async def short_stages(dsmo: DsmoClient, queue: str) -> str:
    """Stages with short timeouts (each retried once after a 0.2 s back-off) and a reply taken
    while the run waits: the stages are regular activities in the history recorded before local
    stages, local ones after."""
    run_id = (await dsmo.start(parse_definition(SHORT_STAGES), {"x": 1}, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.respond(run_id, "ok", event_id="short-1")
    await dsmo.result(run_id)
    return run_id


async def short_stages_early(dsmo: DsmoClient, queue: str) -> str:
    """The same run with its reply sent at once: kept in the inbox during the first stage's
    back-off, taken when the run reaches its wait (no status write for that wait)."""
    run_id = (await dsmo.start(parse_definition(SHORT_STAGES), {"x": 2}, task_queue=queue)).run_id
    await dsmo.respond(run_id, "ok", event_id="early-1")
    await dsmo.result(run_id)
    return run_id


def golden_steady(document: Any, message: Any) -> Any:
    """Answers at once."""
    from dsmo.activities.processors import ProcessorOutput

    return ProcessorOutput(document={"checked": True}, summary={"ok": True})


async def reply_kept_in_the_first_task(dsmo: DsmoClient, queue: str) -> str:
    """A start that carries its reply: the first workflow task keeps it while a short stage runs,
    then its wait takes it; the stage after the wait is a regular activity, the one before local."""
    document = {
        "agent": "golden-reply-with-start",
        "start": "check",
        "nodes": {
            "check": {"actionType": "run_agent", "agent": "golden-steady", "timeout": "5s", "next": "reply"},
            "reply": {"actionType": "wait_for_response", "parameters": {"timeout": "7d"}, "next": "tidy"},
            "tidy": {"actionType": "run_agent", "agent": "golden-steady", "timeout": "5s"},
        },
    }
    reply = [{"type": "MESSAGE_RECEIVED", "data": {"text": "ok"}, "event_id": "with-start-1"}]
    run_id = (await dsmo.start(parse_definition(document), {"x": 4}, task_queue=queue, events=reply)).run_id
    await dsmo.result(run_id)
    return run_id


SLOW_ONCE: set[str] = set()


def golden_slow_once(document: Any, message: Any) -> Any:
    """Outlasts its 1 s timeout on its first attempt at each node of a run, then answers."""
    import time

    from dsmo.activities.processors import ProcessorOutput

    key = f"{message.run_id}/{message.stage}"
    if key not in SLOW_ONCE:
        SLOW_ONCE.add(key)
        time.sleep(2)
    return ProcessorOutput(document={"checked": True}, summary={"ok": True})


async def local_stage_timed_out(dsmo: DsmoClient, queue: str) -> str:
    """A short stage whose first local attempt outlasts its timeout: a back-off, then attempt 2."""
    document = {
        "agent": "golden-local-timeout",
        "start": "check",
        "nodes": {
            "check": {
                "actionType": "run_agent",
                "agent": "golden-slow-once",
                "timeout": "1s",
                "retry": {"maxAttempts": 3, "initialInterval": "200ms", "jitter": 0},
            }
        },
    }
    run_id = (await dsmo.start(parse_definition(document), {"x": 5}, task_queue=queue)).run_id
    await dsmo.result(run_id)
    return run_id


async def short_stages_early_without_generation(dsmo: DsmoClient, queue: str) -> str:
    """`short_stages_early` started as an older starter (or a parent run) does: no `generation`."""
    from temporalio.common import WorkflowIDReusePolicy

    from dsmo.workflows.contracts.run_records import ExecutionRequest

    request = ExecutionRequest(definition=parse_definition(SHORT_STAGES), input={"x": 3})
    run_id = f"golden-short-stages-{uuid.uuid4().hex[:12]}"
    await dsmo.temporal.start_workflow(
        "AgentExecution", request, id=run_id, task_queue=queue, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE
    )
    await dsmo.respond(run_id, "ok", event_id="early-2")
    await dsmo.result(run_id)
    return run_id


ONE_AT_A_TIME = {
    "agent": "golden-one-at-a-time",
    "start": "ask",
    "rateLimit": {"maxConcurrent": 1},
    "nodes": {"ask": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}},
}
# How a flow builds a worker on a queue of its own, which it stops and starts (set by `main`).
OWN_WORKER: dict[str, Callable[[str], Any]] = {}


async def reply_and_cancel_in_one_task(dsmo: DsmoClient, queue: str, *, raw: bool = False) -> str:
    """A run that holds its agent's only slot gets a reply and a cancel while no worker runs it:
    both reach it in one workflow task, the reply first, and it settles the ending that decides.
    ``raw``: started as an older starter does, with no `generation` or `revision` in its request."""
    from temporalio.common import WorkflowIDReusePolicy

    from dsmo.workflows.contracts.run_records import ExecutionRequest

    own = f"{queue}-own"
    async with OWN_WORKER["build"](own):
        # An agent of its own: a run of code from before the fix kept the slot it never gave back.
        definition = parse_definition({**ONE_AT_A_TIME, "agent": f"golden-one-at-a-time-{uuid.uuid4().hex[:6]}"})
        if raw:
            run_id = f"{definition.agent}-{uuid.uuid4().hex[:12]}"
            request = ExecutionRequest(definition=definition)
            policy = WorkflowIDReusePolicy.REJECT_DUPLICATE
            await dsmo.temporal.start_workflow(
                "AgentExecution", request, id=run_id, task_queue=own, id_reuse_policy=policy
            )
        else:
            run_id = (await dsmo.start(definition, task_queue=own)).run_id
        await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.signal_event(run_id, "MESSAGE_RECEIVED", {"event_id": "g-reply", "text": "yes"})
    await dsmo.cancel(run_id, reason="golden")
    async with OWN_WORKER["build"](own):
        await dsmo.result(run_id)
    return run_id


RETRIED_DOCUMENTS = {
    "agent": "golden-retried-documents",
    "start": "documents",
    "nodes": {
        "documents": {
            "actionType": "request_document",
            "parameters": {
                "documents": ["id_card", "cv"],
                "timeout": "3s",
                "onTimeout": "retry",
                "maxRetries": 2,
                "timeoutActions": [{"actionType": "send_message", "parameters": {"message": "still missing"}}],
            },
            "next": "bye",
        },
        "bye": {"actionType": "send_message", "parameters": {"message": "got {{documentUrls}}"}},
    },
}


async def retried_documents(dsmo: DsmoClient, queue: str) -> str:
    """A document wait retried after its first timeout with one of its two documents in: the
    other comes in the second attempt. On the code from before the retried wait kept what it
    had received, the first had to be sent again (a new event id)."""
    definition = parse_definition({**RETRIED_DOCUMENTS, "agent": f"golden-retried-documents-{uuid.uuid4().hex[:6]}"})
    run_id = (await dsmo.start(definition, task_queue=queue)).run_id
    await dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/1"}, event_id="g-1")
    while (view := await dsmo.status(run_id)).status is not RunStatus.WAITING or (view.waiting_data or {}).get(
        "attempt"
    ) != 2:
        await asyncio.sleep(0.05)
    ack = await dsmo.deliver_event(run_id, "DOCUMENT_UPLOADED", {"document": "cv", "url": "s3://d/2"}, event_id="g-2")
    if ack.detail:  # still waiting for the id card: the code from before
        await dsmo.deliver_event(
            run_id, "DOCUMENT_UPLOADED", {"document": "id_card", "url": "s3://d/1"}, event_id="g-3"
        )
    assert (await dsmo.result(run_id)).status is RunStatus.COMPLETED
    return run_id


FLOWS: dict[str, Callable[[DsmoClient, str], Awaitable[str | tuple[str, str]]]] = {
    "candidate_screening": screening,
    "triage_invoice": triage,
    "order_saga_payment_declined": saga_failure,
    "onboarding_every_wait": onboarding,
    # Started by a starter that prepared the run and set it `running` at start (no local
    # activity, no first upsert): the same flows, as runs started since then are in flight.
    "prepared_triage_invoice": triage,
    "prepared_candidate_screening": screening,
    "replayed_onboarding": replayed_onboarding,
    "replayed_order_saga_actions_rerun": replayed_saga,
    "strict_signal_refused": strict_signal_refused,
    "raw_start_bad_run_id": raw_start_bad_run_id,
    "inbox_kept_and_consumed": inbox_kept_and_consumed,
    # The first generation of a run that continued as new (a flow may name the Temporal run).
    "long_chat_segments": long_chat_segments,
    # A run moved to another version: the generation that moved, and the one that arrived.
    "migrated_from": migrated_from,
    "migrated_to": migrated_to,
    # A waiting run moved with restart_timers: recorded on the code that timed its wait out at
    # once (the deadline was lost), and on the code that starts the target wait's timeout afresh.
    "migrated_restarting_timers_lost": migrated_restarting_timers,
    "migrated_restarting_timers": migrated_restarting_timers,
    # A fork: the record up to a node, then live.
    "forked_screening": forked_screening,
    # A cancel while a saga step runs: on the code that stopped waiting for the step, and on
    # the code that waits for it and undoes it too.
    "cancelled_during_a_step_left": cancelled_during_a_step,
    "cancelled_during_a_step": cancelled_during_a_step,
    # A fork from a node before its original's move: on the code that went live on the version
    # the original left, and on the code that goes live on the one it is on now.
    "forked_before_the_move_stayed": forked_before_the_move,
    "forked_before_the_move": forked_before_the_move,
    # A rewind: the generation that went back, and the one that rebuilt its state and went on.
    "rewound_from": rewound_from,
    "rewound_to": rewound_to,
    # A run of a concurrency key that gives its slot back while it waits: with a lock per key
    # value (recorded on the code from before key locks were sharded), and in a sharded key lock.
    "keyed_chat": keyed_chat,
    "keyed_chat_sharded": keyed_chat,
    # The shard that kept those runs' line (its history so far: it runs on, idle, for a minute).
    "key_locks_shard": key_locks_shard,
    # A shard answering a start that replaced its line (since the `key-lock-replaces` change).
    "key_locks_shard_replaced": key_locks_shard_replaced,
    # A throttle's bucket granting the turn of a run that ended while it waited: recorded on the
    # code that spent the turn on it, and on the code that hands it to the next in line.
    "throttle_bucket_ended_turn_spent": throttle_bucket_ended_turn,
    "throttle_bucket_ended_turn_passed_on": throttle_bucket_ended_turn,
    # Data subjects: a run started by DSMO's starter, one started around it, and a retention sweep.
    "subject_screening": subject_screening,
    "subject_raw_start": subject_raw_start,
    "retention_sweep": retention_sweep,
    # A tool-using `llm` node: three model turns (visits), two tool calls, the answer.
    "tool_loop_support": tool_loop_support,
    # A call that waited for approval and was edited; a call a node of the graph made (a wait);
    # an `llm` node without tools.
    "tool_approval_edited": tool_approval_edited,
    "tool_node_asked": tool_node_asked,
    "llm_plain": llm_plain,
    "short_stages_regular": short_stages,
    "short_stages_local": short_stages,
    "short_stages_early": short_stages_early,
    # The same, recorded since DSMO's changes share one marker per execution (common/patches.py):
    # started without `generation` in its request (one marker), and with it (none).
    "short_stages_generation": short_stages_early_without_generation,
    "short_stages_started_in_generation": short_stages_early,
    # Since a run makes a round trip to the server before it continues as new, a move's or a
    # rewind's answer held until then (engine/hand_over.py): a move, a rewind, a long history.
    "migrated_from_round_trip": migrated_from,
    "rewound_from_round_trip": rewound_from,
    "long_chat_round_trip": long_chat_segments,
    # The same move, started with `revision` in its request: the round trip without a marker.
    "migrated_from_revision": migrated_from,
    # A reply and a cancel in one task: recorded on the code from before a run settles its ending
    # past a cancel (the cancel cut the slot's release and the trail's export short), and since.
    "reply_and_cancel_settled_inline": reply_and_cancel_in_one_task,
    "reply_and_cancel_settled_past_it": reply_and_cancel_in_one_task,
    # The same started without `revision`: the change's own marker, asked as the run settles.
    "reply_and_cancel_settled_past_it_marked": lambda dsmo, queue: reply_and_cancel_in_one_task(dsmo, queue, raw=True),
    # A document wait retried with one of its documents in: recorded on the code from before a
    # retried wait kept what it had received (the document sent again), and since.
    "retried_documents_forgotten": retried_documents,
    "retried_documents_kept": retried_documents,
    # A reply taken while the run waits, its next stage short: local in the task that took the
    # reply on the code before (`short_stages_local`), a regular activity since, scheduled with
    # the reply's record.
    "short_stages_reply_recorded_first": short_stages,
    # A start carrying its reply: kept by the first workflow task while the stage before the wait
    # runs locally, taken by the wait in that same task; the stage after it a regular activity.
    "reply_kept_in_the_first_task": reply_kept_in_the_first_task,
    # A local attempt that timed out, then its back-off and the next attempt: replayed by a
    # worker that did not run it (a crash), the recorded timeout must read as it did live.
    "local_stage_timed_out": local_stage_timed_out,
}


async def main(names: list[str]) -> None:
    settings = Settings.from_env()
    dsmo = await DsmoClient.connect(settings.with_changes(codec={"keys": "", "keys_file": ""}))
    from dsmo.activities.artifacts import ArtifactStore

    store = ArtifactStore(
        s3_client(settings), settings.store.bucket, keks=settings.codec.subject_keks(settings.state_dir)
    )
    for child in ("background_check.yaml", "welcome_pack.yaml"):
        DefinitionStore(store).publish(load_definition(EXAMPLES / child))
    db = OrderDatabase(f"sqlite:///{settings.state_dir / 'golden-orders.db'}")
    db.set_stock("lamp", 5)
    actions = order_actions(db)
    actions.add(GoldenHold())
    actions.add(GoldenSlowHold())
    for tool in tool_actions():
        actions.add(tool)
    from dsmo.activities.processors import default_registry

    if "golden-shaky" not in default_registry.names():
        default_registry.register("golden-shaky", "1.0.0")(golden_shaky)
    if "golden-slow-once" not in default_registry.names():
        default_registry.register("golden-slow-once", "1.0.0")(golden_slow_once)
    if "golden-steady" not in default_registry.names():
        default_registry.register("golden-steady", "1.0.0")(golden_steady)
    queue = f"golden-{uuid.uuid4().hex[:6]}"
    OWN_WORKER["build"] = lambda own: build_worker(
        dsmo.temporal, task_queue=own, store=store, channel=FileChannel(settings.outbox_dir), actions=actions
    )
    CHAT.start()
    async with build_worker(
        dsmo.temporal,
        task_queue=queue,
        store=store,
        channel=FileChannel(settings.outbox_dir),
        actions=actions,
        llm=LlmEndpoint(CHAT.url),
    ):
        for name in names or list(FLOWS):
            recorded = await FLOWS[name](dsmo, queue)
            run_id, temporal_run = recorded if isinstance(recorded, tuple) else (recorded, None)
            history = await dsmo.temporal.get_workflow_handle(run_id, run_id=temporal_run).fetch_history()
            document = {"workflowId": run_id, "history": json.loads(history.to_json())}
            (HERE / f"{name}.json").write_text(json.dumps(document, indent=1))
            print(f"recorded {name} ({run_id}, {len(history.events)} events)")


if __name__ == "__main__":
    from dsmo.runtime.exits import hard_exit

    asyncio.run(main(sys.argv[1:]))
    hard_exit(0)
