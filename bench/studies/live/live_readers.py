"""The live-stream study's readers: SSE clients that follow a run's stream to its `end`.

Each reader is a plain `httpx` streaming request to the ingress's ``GET /executions/{id}/stream``,
parsed line by line as a browser's `EventSource` would, each item stamped with its arrival time.
A stream refused while the run is still being created (it has no first workflow task yet) is
asked again; a response that ends before `end` is resumed with ``Last-Event-ID``, as a browser
does. What a stream read is checked: every id once, the trail's events in order from the first,
the last item `end` after the run's terminal event.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

TERMINAL = frozenset({"RUN_COMPLETED", "RUN_ABORTED"})
SHARING = frozenset({"attempt", "end"})  # items the stream gives the id of the item before them
RETRY_SECONDS = 0.2  # before asking again for a stream the ingress refused
MAX_REFUSALS = 100


@dataclass
class StreamRecord:
    """What one reader got from one run's stream.

    Attributes:
        run_id: The run followed.
        kinds: Items by kind (``event``, ``attempt``, ``progress``, ``end``, ...).
        event_lag_s: For each trail event, its arrival less its ``at`` (the workflow's clock).
        progress_lag_s: For each progress item, its arrival less its ``sent`` (the agent's clock).
        refused: Answers other than 200 before the stream opened (each asked again).
        reconnects: Responses that ended before `end` (each resumed after the last id).
        shared_ids: `attempt` and `end` items whose id is the id of the item just before them
            (the `STAGE_ENQUEUED` that began the attempt; the run's last event): they move the
            stream's position no further, so they are counted here, not as duplicates.
        problems: What the checks found wrong (empty: all well).
    """

    run_id: str
    kinds: dict[str, int] = field(default_factory=dict)
    event_lag_s: list[float] = field(default_factory=list)
    progress_lag_s: list[float] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    reconnects: int = 0
    shared_ids: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def items(self) -> int:
        """Every item the stream carried, `end` included."""
        return sum(self.kinds.values())


@dataclass
class OpenStreams:
    """How many streams are open now, and the most at once."""

    now: int = 0
    peak: int = 0

    def opened(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)

    def closed(self) -> None:
        self.now -= 1


def _check(record: StreamRecord, ids: list[str], seqs: list[int], last: str | None, types: list[str]) -> None:
    if len(set(ids)) != len(ids):
        twice = sorted({item for item in ids if ids.count(item) > 1})
        record.problems.append(f"{len(ids) - len(set(ids))} duplicate ids: {twice[:3]}")
    if seqs != list(range(1, len(seqs) + 1)):
        record.problems.append(f"trail events out of order or missing: {seqs[:20]}")
    if last != "end":
        record.problems.append(f"the stream's last item is {last!r}, not end")
    if not types or types[-1] not in TERMINAL:
        record.problems.append(f"no terminal event before end: {types[-3:]}")


async def read_stream(client: httpx.AsyncClient, url: str, key: str, run_id: str, streams: OpenStreams) -> StreamRecord:
    """Follow ``run_id``'s stream at ``url`` (the ingress) with ``key`` until its `end` item.

    Returns:
        What the stream carried and what its checks found (`StreamRecord.problems`).
    """
    record = StreamRecord(run_id)
    ids: list[str] = []
    seqs: list[int] = []
    types: list[str] = []
    last_kind: str | None = None
    last_id: str | None = None
    while last_kind != "end":
        headers = {"Authorization": f"Bearer {key}"} | ({"Last-Event-ID": last_id} if last_id else {})
        async with client.stream("GET", f"{url}/executions/{run_id}/stream", headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                code = str(response.status_code)
                record.refused[code] = record.refused.get(code, 0) + 1
                if sum(record.refused.values()) > MAX_REFUSALS:
                    record.problems.append(f"refused {record.refused}: {response.text[:200]}")
                    return record
                await asyncio.sleep(RETRY_SECONDS)
                continue
            streams.opened()
            try:
                fields: dict[str, str] = {}
                async for line in response.aiter_lines():
                    if line:
                        name, _, value = line.partition(":")
                        fields[name] = value.removeprefix(" ")
                        continue
                    if "event" in fields:
                        arrived = time.time()
                        kind, data = fields["event"], json.loads(fields.get("data", "{}"))
                        last_kind, record.kinds[kind] = kind, record.kinds.get(kind, 0) + 1
                        if fields.get("id"):
                            if kind in SHARING and fields["id"] == last_id:
                                record.shared_ids += 1
                            else:
                                ids.append(fields["id"])
                            last_id = fields["id"]
                        _stamp(record, kind, data, arrived, seqs, types)
                        if kind == "end":
                            break
                    fields = {}
            finally:
                streams.closed()
        if last_kind != "end":
            record.reconnects += 1
    _check(record, ids, seqs, last_kind, types)
    return record


def _stamp(
    record: StreamRecord, kind: str, data: dict[str, Any], arrived: float, seqs: list[int], types: list[str]
) -> None:
    if kind == "event":
        seqs.append(int(data["seq"]))
        types.append(str(data["type"]))
        record.event_lag_s.append(arrived - datetime.fromisoformat(data["at"]).timestamp())
    elif kind == "progress" and "sent" in data:
        record.progress_lag_s.append(arrived - float(data["sent"]))
    elif kind == "error":
        record.problems.append(f"error item: {data}")
