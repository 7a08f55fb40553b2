"""Deliver an event to a run, as an outside system would, and print the run's answer.

    python starter/deliver_event.py RUN_ID MESSAGE_RECEIVED '{"text": "Yes, still interested"}' reply-1

What `dsmo events RUN --type TYPE --data JSON --event-id ID` does: the event goes through the
run's validated update, so a run that cannot take it refuses it with the reason, and the same
event id delivered twice is taken once.
"""

from __future__ import annotations

import asyncio
import json
import sys

from dsmo import DsmoClient, hard_exit


async def main(run_id: str, event_type: str, data_json: str, event_id: str) -> int:
    client = await DsmoClient.connect()
    ack = await client.deliver_event(run_id, event_type, json.loads(data_json), event_id=event_id)
    print(f"event {ack.event_id}: {'accepted' if ack.accepted else 'not accepted'}; the run is {ack.status}")
    return 0


if __name__ == "__main__":
    hard_exit(asyncio.run(main(*sys.argv[1:5])))
