"""One example per command, shown at the end of its --help (commands with their own keep theirs)."""

from __future__ import annotations

from collections.abc import Iterator

import click

EXAMPLES: dict[str, str] = {
    "dev up": "dsmo dev up --worker",
    "dev down": "dsmo dev down",
    "dev status": "dsmo dev status",
    "dev reset": "dsmo dev reset --yes && dsmo dev up",
    "worker": "DSMO_TASK_QUEUE=agent-executions dsmo worker",
    "definitions validate": "dsmo definitions validate examples/triage.yaml",
    "definitions publish": "dsmo definitions publish examples/background_check.yaml",
    "runs list": "dsmo runs list --status waiting --agent document-triage",
    "runs fork": "dsmo runs fork ana-1 --from read_document --set 'docUrl=\"s3://uploads/ana/id-v2.json\"'",
    "runs rewind": "dsmo runs rewind ana-1 --to docs --set 'applicant=\"ana@example.com\"' --reason 'wrong address'",
    "runs migrate": "dsmo runs migrate employee-onboarding --from 1.0.0 --to 1.1.0 --map contract:signature --dry-run",
    "runs stats": "dsmo runs stats --json",
    "runs waiting": "dsmo runs waiting",
    "runs stuck": "dsmo runs stuck || echo 'some runs are stuck'",
    "runs bulk cancel": "dsmo runs bulk cancel --query \"AgentName='candidate-screening'\" "
    "--reason 'campaign closed' --dry-run",
    "runs bulk redrive": "dsmo runs bulk redrive --query \"AgentName='order-saga'\" --rate 5",
    "runs bulk deliver": "dsmo runs bulk deliver --query \"WaitingFor='event'\" --type EVENT_COMPLETED "
    '--data \'{"result": "cancelled", "data": {"why": "office closed"}}\' --batch-id office-closed-12-24',
    "replay": "dsmo replay document-triage-1a2b --from-stage classify",
    "verify": "dsmo verify document-triage-1a2b",
    "dlq list": "dsmo dlq list --json",
    "audit verify": "dsmo audit verify document-triage-1a2b; dsmo audit verify --archive run.zip",
    "runs export": "dsmo runs export document-triage-1a2b --children -o run.zip",
    "subjects erase": 'dsmo subjects erase A-17 --reason "erasure request #4411" --cancel-runs --dry-run',
    "subjects log": "dsmo subjects log --json",
    "compensations failed": "dsmo compensations failed",
    "compensations retry": "dsmo compensations retry comp-retry:order-saga-1a2b:process_payment",
    "keys add": "dsmo keys add crm --scope start --scope read --scope events:MESSAGE_RECEIVED",
    "keys list": "dsmo keys list",
    "hooks list": "dsmo hooks list --json",
    "hooks remove": "dsmo hooks remove hook-3f9a1c2b7d4e",
    "hooks failed": "dsmo hooks failed",
    "hooks redeliver": "dsmo hooks redeliver hook-3f9a1c2b7d4e.9c1f0a7b3e5d2c4a6b8e",
    "keys revoke": "dsmo keys revoke crm",
    "codec-server": "DSMO_CODEC_KEYS=k1:$(cat key.b64) dsmo codec-server --bind 127.0.0.1:8081",
}


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def add_examples(group: click.Group) -> None:
    for path, command in commands(group):
        if path in EXAMPLES and "Example" not in (command.help or ""):
            command.epilog = f"Example:  {EXAMPLES[path]}"
