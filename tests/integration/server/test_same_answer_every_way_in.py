"""The same malformed event gets the same answer whichever way it comes in.

One waiting run; each bad event is sent through `dsmo events --type`, DsmoClient, the ingress, the
console's task form, a raw `deliver_event` update and a raw signal. Every way refuses it with the
one line `well_formed` gives (the console shows its reason beside the field it names, when the
page's form has that field), none but
the signal writes anything to the run's history, and the signal's EVENT_REJECTED records that
same line. An event that breaks two rules is refused for the same one everywhere.
"""

from __future__ import annotations

import asyncio
import html
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowUpdateFailedError

from dsmo.client.client_errors import EventMalformed
from dsmo.server.api_keys import KeyStore
from dsmo.server.console.forms import FORMS
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from dsmo.workflows.events.resume_events import EventRejected, well_formed
from tests.conftest import Harness
from tests.console_session import csrf_of, sign_in
from tests.ingress_server import serving

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
WAITS: dict[str, Any] = {
    "agent": "every-way-in",
    "start": "reply",
    "nodes": {"reply": {"actionType": "wait_for_response", "parameters": {"timeout": "1h"}}},
}


@dataclass(frozen=True)
class Bad:
    name: str
    event_type: str
    event_id: str
    form: dict[str, str]  # what the console's form posts; the event's data is what it makes of it

    @property
    def data(self) -> dict[str, str]:
        return {name: value for name, value in self.form.items() if value}

    def problem(self) -> EventRejected:
        with pytest.raises(EventRejected) as refused:
            well_formed(self.event_type, self.event_id, self.data)
        return refused.value


CASES = [
    Bad("missing reply", "MESSAGE_RECEIVED", "way-1", {"text": ""}),
    Bad("reply too long", "MESSAGE_RECEIVED", "way-2", {"text": "x" * 20_001}),
    Bad("sender too long", "MESSAGE_RECEIVED", "way-6", {"text": "hola", "from": "x" * 501}),
    Bad("score not a number", "TEST_COMPLETED", "way-3", {"score": "high", "result": "passed"}),
    Bad("id with a newline", "MESSAGE_RECEIVED", "way-4\n", {"text": "hola"}),
    Bad("bad id and missing reply", "MESSAGE_RECEIVED", " way-5", {"text": ""}),
]


@dataclass
class Ways:
    harness: Harness
    run_id: str
    url: str
    api_key: str
    console: httpx.Client

    async def history_length(self) -> int:
        return len((await self.harness.dsmo.temporal.get_workflow_handle(self.run_id).fetch_history()).events)


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The ingress and the console on a free port, and a key that may read and send any event."""
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue},
        ingress={"api_keys_file": str(tmp_path / "keys.json"), "event_burst": 100},
    )
    key = KeyStore(settings.api_keys_path).add("crm", ["read", "events:*"])
    with serving(settings) as url:
        yield url, key


async def test_a_malformed_event_gets_the_same_answer_every_way_in(harness: Harness, served: tuple[str, str]) -> None:
    url, key = served
    run_id = await harness.start(parse_definition(WAITS))
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    console = httpx.Client(base_url=url, timeout=30)
    assert (await asyncio.to_thread(sign_in, console, key)).status_code == 303
    ways = Ways(harness, run_id, url, key, console)

    for case in CASES:
        problem = case.problem()
        answer = str(problem)
        before = await ways.history_length()
        answers = {
            "cli": await by_cli(ways, case),
            "client": await by_client(ways, case),
            "ingress": await by_ingress(ways, case),
            "console": await by_console(ways, case, problem),
            "update": await by_update(ways, case),
        }
        assert answers == dict.fromkeys(answers, answer), case.name
        assert await ways.history_length() == before, f"{case.name}: refused, yet written"
        assert await by_signal(ways, case) == answer, case.name

    # None of it moved the run: it still waits, and a good reply completes it (and it replays).
    assert (await harness.dsmo.status(run_id)).status is RunStatus.WAITING
    await harness.dsmo.respond(run_id, "hola", event_id="way-good")
    assert (await harness.dsmo.result(run_id)).status is RunStatus.COMPLETED
    console.close()


async def by_cli(ways: Ways, case: Bad) -> str:
    args = ["events", ways.run_id, "--type", case.event_type, "--data", json.dumps(case.data)]
    proc = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), *args, "--event-id", case.event_id],
        capture_output=True,
        text=True,
        env=ways.harness.cli_env(),
        timeout=60,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    return line.removeprefix(f"error: {case.event_type} rejected: ")


async def by_client(ways: Ways, case: Bad) -> str:
    with pytest.raises(EventMalformed) as refused:
        await ways.harness.dsmo.deliver_event(ways.run_id, case.event_type, case.data, event_id=case.event_id)
    assert str(refused.value) == f"{case.event_type} rejected: {refused.value.problem}"
    return str(refused.value.problem)


async def by_ingress(ways: Ways, case: Bad) -> str:
    body = {"type": case.event_type, "event_id": case.event_id, "data": case.data}
    async with httpx.AsyncClient(base_url=ways.url, timeout=30) as client:
        answer = await client.post(
            f"/executions/{ways.run_id}/events", json=body, headers={"Authorization": f"Bearer {ways.api_key}"}
        )
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_event", answer.text
    return str(answer.json()["error"]["message"])


async def by_console(ways: Ways, case: Bad, problem: EventRejected) -> str:
    """The console shows the reason beside the field it names, or the whole line above the form."""
    page = await asyncio.to_thread(ways.console.get, f"/console/runs/{ways.run_id}")
    form = {"csrf_token": csrf_of(page.text), "event_type": case.event_type, "event_id": case.event_id, **case.form}
    answer = await asyncio.to_thread(ways.console.post, f"/console/runs/{ways.run_id}/events", data=form)
    assert answer.status_code == 422, answer.text[:500]
    shown = html.unescape(answer.text)
    # The page shows the form of the run's wait (a reply): a field it lacks gets the line above it.
    if problem.field in {control.name for control in FORMS["response"].fields}:
        assert f'<p class="error" id="f-{problem.field}-error">{problem.reason}</p>' in shown
        return f"{case.event_type}.{problem.field}: {problem.reason}"
    start = shown.index('id="form-error">') + len('id="form-error">')
    return shown[start : shown.index("</p>", start)]


async def by_update(ways: Ways, case: Bad) -> str:
    envelope = {"type": case.event_type, "event_id": case.event_id, "data": case.data}
    handle = ways.harness.dsmo.temporal.get_workflow_handle(ways.run_id)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("deliver_event", envelope)
    return str(getattr(refused.value.cause, "message", refused.value.cause))


async def by_signal(ways: Ways, case: Bad) -> str:
    """A raw signal has no answer: the run records EVENT_REJECTED with its reason."""
    handle = ways.harness.dsmo.temporal.get_workflow_handle(ways.run_id)
    await handle.signal(case.event_type, {"event_id": case.event_id, **case.data})
    deadline = asyncio.get_running_loop().time() + 60  # a hang guard, not a speed target
    while True:
        trail = await ways.harness.dsmo.events(ways.run_id, live=True)
        rejected = [e for e in trail if e.type == "EVENT_REJECTED" and e.data.get("eventId") == case.event_id]
        if rejected:
            assert rejected[0].data["via"] == "signal"
            return str(rejected[0].data["reason"])
        assert asyncio.get_running_loop().time() < deadline, f"{case.name}: the signal was never recorded"
        await asyncio.sleep(0.2)


def test_the_cases_cover_a_form_field_the_whole_event_and_two_broken_rules() -> None:
    fields = {case.problem().field for case in CASES}
    assert {"text", "from", "score", "event_id"} <= fields
    two = next(case for case in CASES if case.name == "bad id and missing reply")
    assert two.problem().field == "event_id"  # the strict rule's answer, everywhere
    assert len({case.event_id for case in CASES}) == len(CASES)  # the ids tell the signals apart
