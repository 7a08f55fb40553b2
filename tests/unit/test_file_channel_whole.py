"""The file channel's message files appear whole or not at all: a half-written one is not "sent"."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dsmo.activities.messaging import FileChannel
from dsmo.workflows.contracts.activity_io import SendMessageRequest


def message(key: str, text: str = "Your documents are due") -> SendMessageRequest:
    return SendMessageRequest(run_id="run-1", node="remind", message=text, to="ada", idempotency_key=key)


def test_an_empty_file_left_by_a_crash_is_not_taken_as_sent(tmp_path: Path) -> None:
    # What a worker killed between creating and writing the file left behind.
    folder = tmp_path / "run-1"
    folder.mkdir()
    (folder / "k1.json").write_bytes(b"")
    (folder / "k2.json").write_text('{"kind": "message", "mess')  # cut off mid-write

    first = FileChannel(tmp_path).send(message("k1"))
    second = FileChannel(tmp_path).send(message("k2"))

    assert not first.duplicate and not second.duplicate
    for key in ("k1", "k2"):
        written = json.loads((folder / f"{key}.json").read_text())
        assert written["message"] == "Your documents are due" and written["idempotencyKey"] == key
    assert sorted(path.name for path in folder.iterdir()) == ["k1.json", "k2.json"]  # no scratch files left


def test_a_whole_file_still_means_sent_once(tmp_path: Path) -> None:
    channel = FileChannel(tmp_path)
    assert not channel.send(message("k1")).duplicate
    again = channel.send(message("k1", text="a retry's text must not replace the sent one"))
    assert again.duplicate
    assert json.loads((tmp_path / "run-1" / "k1.json").read_text())["message"] == "Your documents are due"


def test_racing_retries_send_once_and_leave_one_whole_file(tmp_path: Path) -> None:
    channel = FileChannel(tmp_path)
    with ThreadPoolExecutor(max_workers=8) as pool:
        receipts = list(pool.map(lambda _: channel.send(message("k1", "x" * 200_000)), range(16)))
    assert sum(not receipt.duplicate for receipt in receipts) == 1
    assert json.loads((tmp_path / "run-1" / "k1.json").read_text())["message"] == "x" * 200_000
    assert [path.name for path in (tmp_path / "run-1").iterdir()] == ["k1.json"]
