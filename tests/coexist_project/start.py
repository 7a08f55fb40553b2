"""Start one run of the team's definition through DSMO and print what happened, as JSON."""

from __future__ import annotations

import asyncio
import json
import sys

import activities
import dsmo
import workflows


async def main(text: str, task_queue: str) -> None:
    client = await dsmo.DsmoClient.connect(dsmo.Settings.from_env())
    definition = dsmo.load_definition(workflows.DEFINITIONS / "review.yaml")
    run_id = (await client.start(definition, {"text": text}, task_queue=task_queue)).run_id
    result = await asyncio.wait_for(client.result(run_id), 60)
    print(
        json.dumps(
            {
                "runId": run_id,
                "status": result.status.value,
                "path": result.path,
                "variables": result.variables,
                "modules": {
                    name: module.__file__
                    for name, module in (("dsmo", dsmo), ("workflows", workflows), ("activities", activities))
                },
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
