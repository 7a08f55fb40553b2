"""`make demo`: one agent run end to end on the embedded stack, through the Python API.

Starts the sample definition, waits until the run is WAITING for a reply, delivers a
simulated reply the way an outside system would (the validated `deliver_event` update),
and prints the final status, the audit trail, the artifacts and the Web UI link.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsmo import DsmoClient, RunStatus, Settings, hard_exit, load_definition

# Printing the trail and artifacts as `dsmo` does: internals, not part of the public API.
from dsmo.activities.artifacts import ArtifactStore
from dsmo.cli.render import event_lines, status_lines
from dsmo.runtime.storage import s3_client

DEFINITION = Path(__file__).with_name("candidate_screening.yaml")
CANDIDATE = {"candidate": {"name": "ana maría lópez", "phone": "+34 600 111 222", "skills": ["Python", "SQL"]}}


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


async def main() -> int:
    settings = Settings.from_env()
    dsmo = await DsmoClient.connect(settings)
    definition = load_definition(DEFINITION)

    run = await dsmo.start(definition, CANDIDATE)  # the run's handle, like Temporal's workflow handle
    run_id = run.run_id
    section(f"started {run_id} ({definition.agent}, workflow_version {definition.workflow_version})")

    waiting = await run.wait_for_status({RunStatus.WAITING}, timeout=60)
    print("\n".join(status_lines(waiting, run_url=settings.temporal.run_url(run_id))))

    section("a reply arrives from outside (MESSAGE_RECEIVED through deliver_event)")
    ack = await run.respond("Sí, sigo interesada", event_id=f"{run_id}-reply-1")
    print(f"event {ack.event_id}: {'accepted' if ack.accepted else 'not accepted'}")

    result = await run.result()
    section("final status")
    print("\n".join(status_lines(await run.status(), run_url=settings.temporal.run_url(run_id))))

    section("audit trail")
    print("\n".join(event_lines(await run.events())))

    section("artifacts")
    store = ArtifactStore(s3_client(settings), settings.store.bucket)
    for uri in store.list_uris(f"artifacts/{definition.workflow_version}/{run_id}/"):
        print(uri)
    print(f"messages sent: {settings.outbox_dir / run_id}")

    section("web UI")
    print(settings.temporal.run_url(run_id))
    host, _, port = settings.ingress.bind.rpartition(":")
    print(f"the console: `.venv/bin/dsmo serve`, then http://{host or '127.0.0.1'}:{port}/console/runs/{run_id}")
    return 0 if result.status is RunStatus.COMPLETED else 1


if __name__ == "__main__":
    hard_exit(asyncio.run(main()))
