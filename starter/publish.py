"""Publish an agent definition, so runs can be started by the agent's name.

    python starter/publish.py examples/candidate_screening.yaml

What `dsmo definitions publish FILE` does, in a few lines of the Python API.
"""

from __future__ import annotations

import asyncio
import sys

from dsmo import DsmoClient, hard_exit, load_definition


async def main(path: str) -> int:
    client = await DsmoClient.connect()
    definition = load_definition(path)
    await client.publish(definition)
    print(f"published {definition.agent} {definition.version} (workflow_version {definition.workflow_version})")
    return 0


if __name__ == "__main__":
    hard_exit(asyncio.run(main(sys.argv[1])))
