"""Start a run of a published agent by its name, and print where it stands.

    python starter/start_run.py candidate-screening '{"candidate": {"name": "Ana", "phone": "+34 600"}}'

What `dsmo start AGENT --input JSON` does: the run starts on the agent's latest published
version; a worker (`dsmo worker`, or the one `make up` starts) runs it.
"""

from __future__ import annotations

import asyncio
import json
import sys

from dsmo import DsmoClient, hard_exit


async def main(agent: str, input_json: str) -> int:
    client = await DsmoClient.connect()
    run = await client.start(agent, json.loads(input_json))  # the run's handle
    status = await run.status()
    print(f"started {run.run_id} ({run.started.status}): {status.status}")
    return 0


if __name__ == "__main__":
    hard_exit(asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "{}")))
