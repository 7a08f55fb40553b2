"""Sending a run back from the CLI (`dsmo runs rewind`), over HTTP (`POST /executions/{id}/rewind`)
and from the console's run page: the run's answer, the `operate` scope, and refusals writing nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsmo.server.api_keys import KeyStore
from tests.conftest import Harness
from tests.console_session import csrf_of, sign_in
from tests.ingress_server import serving
from tests.migration_versions import history_length
from tests.rewind_flow import waiting_at, waiting_for_signature

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


async def dsmo_cli(harness: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    # In a thread: the test's worker runs on this loop and must go on serving the run meanwhile.
    return await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "dsmo"), *args],
        capture_output=True,
        text=True,
        env=harness.cli_env(),
        timeout=120,
        check=False,
    )


async def rewound_data(harness: Harness, run_id: str) -> list[dict[str, Any]]:
    return [event.data for event in await harness.dsmo.events(run_id) if event.type == "RUN_REWOUND"]


async def test_dsmo_runs_rewind_says_what_it_did_in_one_line_and_refuses_writing_nothing(harness: Harness) -> None:
    run_id = await waiting_for_signature(harness)
    history = await history_length(harness.dsmo, run_id)

    unknown = await dsmo_cli(harness, "runs", "rewind", run_id, "--to", "nowhere", "--reason", "typo")
    unread = await dsmo_cli(harness, "runs", "rewind", run_id, "--to", "docs", "--set", "colour=1", "--reason", "x")
    for refused in (unknown, unread):
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stdout == "" and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr
    assert unknown.stderr.startswith("error: --to: 'nowhere' is not a node of"), unknown.stderr
    assert unread.stderr.startswith(f"error: run '{run_id}': set: "), unread.stderr
    assert "colour" in unread.stderr
    assert await history_length(harness.dsmo, run_id) == history  # nothing written to the run

    done = await dsmo_cli(
        harness, "runs", "rewind", run_id, "--to", "docs", "--set", "applicant=ana@right.example",
        "--reason", "wrong address", "--by", "ops",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"run {run_id} goes back from sign to docs; undone: order"
    await waiting_at(harness, run_id, "docs")
    assert (await harness.dsmo.variables(run_id))["applicant"] == "ana@right.example"
    [data] = await rewound_data(harness, run_id)
    assert (data["fromNode"], data["toNode"], data["compensate"], data["sagaSteps"]) == (
        "sign",
        "docs",
        True,
        ["order"],
    )
    assert (data["requestedBy"], data["reason"], data["set"]) == (
        "ops",
        "wrong address",
        {"applicant": "ana@right.example"},
    )


async def test_dsmo_runs_rewind_no_compensate_json_prints_the_answer_with_the_steps_left_done(
    harness: Harness,
) -> None:
    run_id = await waiting_for_signature(harness)
    done = await dsmo_cli(
        harness, "runs", "rewind", run_id, "--to", "docs", "--reason", "re-check", "--no-compensate", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "runId": run_id,
        "fromNode": "sign",
        "toNode": "docs",
        "compensated": [],
        "compensationFailed": [],
        "left": ["order"],
    }
    await waiting_at(harness, run_id, "docs")
    [data] = await rewound_data(harness, run_id)
    assert (data["compensate"], data["requestedBy"]) == (False, "user")


@dataclass
class Served:
    url: str
    keys: dict[str, str]

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-API-Key": self.keys[key]}, timeout=60)

    def browser(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)


@pytest.fixture
def served(harness: Harness, tmp_path: Path) -> Iterator[Served]:
    settings = harness.settings.with_changes(
        temporal={"task_queue": harness.task_queue}, ingress={"api_keys_file": str(tmp_path / "keys.json")}
    )
    store = KeyStore(settings.api_keys_path)
    keys = {"ops": store.add("ops", ["operate", "read"]), "reader": store.add("reader", ["read", "cancel"])}
    with serving(settings) as url:
        yield Served(url, keys)


async def post(client: httpx.Client, run_id: str, body: dict[str, Any]) -> httpx.Response:
    return await asyncio.to_thread(client.post, f"/executions/{run_id}/rewind", json=body)


async def test_a_run_goes_back_over_http_only_with_the_operate_scope(harness: Harness, served: Served) -> None:
    run_id = await waiting_for_signature(harness)
    ops, reader = served.client("ops"), served.client("reader")
    ask = {"toNode": "docs", "set": {"applicant": "ana@right.example"}, "reason": "wrong address"}
    history = await history_length(harness.dsmo, run_id)

    forbidden = await post(reader, run_id, ask)
    assert forbidden.status_code == 403, forbidden.text
    assert forbidden.json()["error"] == {"code": "forbidden", "message": "key 'reader' lacks the scope 'operate'"}
    unknown_node = await post(ops, run_id, {**ask, "toNode": "nowhere"})
    assert unknown_node.status_code == 422, unknown_node.text
    assert unknown_node.json()["error"]["code"] == "rewind_refused"
    assert unknown_node.json()["error"]["message"].startswith("toNode: 'nowhere' is not a node of")
    unread = await post(ops, run_id, {**ask, "set": {"colour": 1}})
    assert unread.status_code == 409, unread.text
    assert unread.json()["error"]["code"] == "rewind_refused"
    assert unread.json()["error"]["message"].startswith(f"run '{run_id}': set: ")
    no_reason = await post(ops, run_id, {"toNode": "docs"})
    assert no_reason.status_code == 422 and no_reason.json()["error"]["message"].startswith("reason: "), no_reason.text
    missing = await post(ops, f"{run_id}-nobody", ask)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found", missing.text
    assert await history_length(harness.dsmo, run_id) == history  # no refusal wrote anything

    done = await post(ops, run_id, {**ask, "requestedBy": "ana's manager"})
    assert done.status_code == 200, done.text
    assert done.json() == {
        "runId": run_id,
        "fromNode": "sign",
        "toNode": "docs",
        "compensated": ["order"],
        "compensationFailed": [],
        "left": [],
    }
    await waiting_at(harness, run_id, "docs")
    [data] = await rewound_data(harness, run_id)
    assert (data["requestedBy"], data["reason"]) == ("ops (ana's manager)", "wrong address")


async def test_the_run_page_sends_a_waiting_run_back_and_shows_it_in_the_trail(
    harness: Harness, served: Served
) -> None:
    run_id = await waiting_for_signature(harness)
    history = await history_length(harness.dsmo, run_id)
    with served.browser() as reader:
        await asyncio.to_thread(sign_in, reader, served.keys["reader"])
        page = (await asyncio.to_thread(reader.get, f"/console/runs/{run_id}")).text
        assert "Send back to an earlier node" not in page  # no `operate`, no form
        tried = await asyncio.to_thread(
            reader.post,
            f"/console/runs/{run_id}/rewind",
            data={"csrf_token": csrf_of(page), "to_node": "docs", "reason": "x", "compensate": "on"},
        )
        assert tried.status_code == 403 and "lacks the scope &#39;operate&#39;" in tried.text, tried.text

    with served.browser() as ops:
        await asyncio.to_thread(sign_in, ops, served.keys["ops"])
        page = (await asyncio.to_thread(ops.get, f"/console/runs/{run_id}")).text
        assert "Send back to an earlier node" in page
        options = page[page.index('id="rewind-to"') :].split("</select>")[0]
        assert [line.split('"')[1] for line in options.split("<option value=")[1:]] == ["hello", "docs", "order"]
        form = {"csrf_token": csrf_of(page), "to_node": "docs", "corrections": "applicant=ana@right.example"}

        refused = await asyncio.to_thread(ops.post, f"/console/runs/{run_id}/rewind", data={**form, "reason": " "})
        assert refused.status_code == 422, refused.text
        assert 'id="rewind-error">reason: say why the run goes back' in refused.text
        assert "applicant=ana@right.example</textarea>" in refused.text  # the form as it was filled
        unread = await asyncio.to_thread(
            ops.post,
            f"/console/runs/{run_id}/rewind",
            data={**form, "corrections": "colour=1", "reason": "r", "compensate": "on"},
        )
        assert unread.status_code == 409 and f"run &#39;{run_id}&#39;: set: " in unread.text, unread.text
        assert await history_length(harness.dsmo, run_id) == history

        sent = await asyncio.to_thread(
            ops.post,
            f"/console/runs/{run_id}/rewind",
            data={**form, "reason": "wrong document", "compensate": "on"},
        )
        assert sent.status_code == 303, sent.text
        assert sent.headers["location"] == f"/console/runs/{run_id}?notice=rewound"
        await waiting_at(harness, run_id, "docs")
        shown = (await asyncio.to_thread(ops.get, sent.headers["location"])).text
        await harness.dsmo.cancel(run_id, reason="done testing")
        await harness.dsmo.result(run_id)
        ended = await asyncio.to_thread(
            ops.post, f"/console/runs/{run_id}/rewind", data={**form, "reason": "again", "compensate": "on"}
        )
        assert ended.status_code == 409, ended.text  # no form on an ended run's page: the refusal alone
        assert "the run has ended (cancelled); fork it instead" in ended.text, ended.text
    assert "Sent back: the run goes back to the node" in shown
    words = " ".join(shown.split())
    assert 'Sent back: <span class="rewind">from <code>sign</code> to <code>docs</code></span>' in words
    assert (
        "Sent back from <code>sign</code> to <code>docs</code>, set applicant; undone: order; "
        "asked by console:ops: “wrong document”." in words
    )
    [data] = await rewound_data(harness, run_id)
    assert (data["toNode"], data["requestedBy"], data["compensate"]) == ("docs", "console:ops", True)
