"""What a run page shows, gathered in one go: status, variables, trail, graph, artifacts, family.

The run answers its own queries (status, variables, events); the definition's graph comes from
the run's configuration snapshot, laid out once per workflow version and kept; artifacts are the
objects the trail refers to, each with a short-lived presigned download link.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dsmo.client.client_errors import RunNotFound
from dsmo.client.dsmo_client import DsmoClient
from dsmo.client.trail_store import subject_erased
from dsmo.runtime.storage import ARTIFACT_PREFIX, ArtifactStore
from dsmo.server.console import graph
from dsmo.server.console.conversations import TurnShown, conversation
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.run_records import AuditEvent, StatusView
from dsmo.workflows.definition.model import AgentDefinition

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LINK_SECONDS = 900  # how long a download link works
KEPT_GRAPHS = 256  # workflow versions whose definition and layout stay in memory


@dataclass(frozen=True)
class Artifact:
    """An object the trail refers to, and a link that downloads it (none when it is erased)."""

    stage: str | None
    name: str
    uri: str
    link: str
    erased: bool = False


@dataclass(frozen=True)
class RunPage:
    """Everything a run page shows."""

    view: StatusView
    variables: dict[str, Any]
    trail: list[AuditEvent]
    graph_svg: str | None
    definition: AgentDefinition | None
    artifacts: list[Artifact]
    parent: str | None
    children: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    forks: list[dict[str, Any]] = field(default_factory=list)  # runs forked from this one
    conversation: list[TurnShown] = field(default_factory=list)  # a tool-using node's turns


class GraphCache:
    """Definitions and their layouts by configuration snapshot: immutable, so kept (bounded)."""

    def __init__(self, store: ArtifactStore, size: int = KEPT_GRAPHS) -> None:
        self.store, self.size = store, size
        self._kept: OrderedDict[str, tuple[AgentDefinition, graph.Drawing]] = OrderedDict()

    async def get(self, config_ref: str) -> tuple[AgentDefinition, graph.Drawing]:
        """The definition a run follows and its layout."""
        if config_ref in self._kept:
            self._kept.move_to_end(config_ref)
            return self._kept[config_ref]
        snapshot = await asyncio.to_thread(self.store.read_json, config_ref)
        definition = AgentDefinition.model_validate(snapshot["definition"])
        kept = (definition, await asyncio.to_thread(graph.layout, definition))
        self._kept[config_ref] = kept
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return kept


def _artifacts(trail: list[AuditEvent], s3: S3Client, store: ArtifactStore) -> list[Artifact]:
    """The trail's objects with their links. A run with a data subject stores its own objects
    sealed: they are served opened by the console (`artifact_path`), or shown as erased."""
    created = trail[0].data if trail and trail[0].type == "RUN_CREATED" else {}
    sealed = "subject" in created
    erased = sealed and subject_erased(store, created)
    found: dict[str, Artifact] = {}
    for event in trail:
        for uri in event.artifact_uris:
            if uri in found or not uri.startswith("s3://"):
                continue
            bucket, key = store.key_of(uri)
            name = key.rsplit("/", 1)[-1]
            if sealed and run_of_key(key) == event.run_id:
                found[uri] = Artifact(
                    event.stage, name, uri, "" if erased else artifact_path(event.run_id, key), erased
                )
                continue
            link = s3.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=LINK_SECONDS
            )
            found[uri] = Artifact(event.stage, name, uri, link)
    return list(found.values())


def run_of_key(key: str) -> str | None:
    """The run whose own object ``key`` is (input, outputs, dead letters, event values, uploads), or None."""
    parts = key.split("/")
    if key.startswith(ARTIFACT_PREFIX) and len(parts) > 3:
        return parts[2]  # artifacts/{version}/{run}/...
    if parts[0] in ("dlq", "events", "uploads") and len(parts) > 2:
        return parts[1]
    return None


def artifact_path(run_id: str, key: str) -> str:
    """The console address that serves one of a run's sealed objects, opened."""
    return f"/console/runs/{quote(run_id, safe='')}/artifacts/{quote(key)}"


def _children(trail: list[AuditEvent]) -> list[dict[str, Any]]:
    return [
        {"run_id": event.data["childExecutionId"], "agent": event.data.get("agent"), "stage": event.stage}
        for event in trail
        if event.type == "ACTION_COMPLETED" and event.data.get("childExecutionId")
    ]


async def load_run_page(
    dsmo: DsmoClient, graphs: GraphCache, s3: S3Client, store: ArtifactStore, run_id: str
) -> RunPage:
    """Gather a run page; parts that cannot be read are listed in ``problems``, not fatal.

    Raises:
        RunNotFound: No run has this id.
    """
    try:
        view = await dsmo.status(run_id)
    except RunNotFound:
        # Its history is gone (erased, or past retention): its exported trail still tells it.
        return await _from_trail(dsmo, graphs, s3, store, run_id)
    problems = [view.problem] if view.problem else []
    variables: dict[str, Any] = {}
    trail: list[AuditEvent] = []
    describing = asyncio.ensure_future(dsmo.run(run_id).describe())
    if not view.problem:
        answers = await asyncio.gather(dsmo.variables(run_id), dsmo.events(run_id), return_exceptions=True)
        for answer in answers:
            if isinstance(answer, DsmoError):
                problems.append(str(answer))
            elif isinstance(answer, BaseException):
                describing.cancel()
                raise answer
        variables = answers[0] if isinstance(answers[0], dict) else {}
        trail = answers[1] if isinstance(answers[1], list) else []
    description = await describing  # asked beside the queries, not after them
    try:
        forks = await dsmo.forks(run_id)
    except Exception as err:  # noqa: BLE001 - the page stands without the list; it says why
        forks = []
        problems.append(f"forks: {err}")
    definition, svg = None, None
    if view.config_ref:
        try:
            definition, drawing = await graphs.get(view.config_ref)
            svg = graph.svg(definition, path=view.path, current=view.current_node, drawing=drawing)
        except (DsmoError, KeyError, ValueError) as err:
            problems.append(f"graph: {err}")
    return RunPage(
        view=view,
        variables=variables,
        trail=trail,
        graph_svg=svg,
        definition=definition,
        artifacts=await asyncio.to_thread(_artifacts, trail, s3, store),
        parent=description.parent_id,
        children=_children(trail),
        problems=problems,
        forks=forks,
        conversation=await asyncio.to_thread(conversation, trail, store),
    )


async def _from_trail(dsmo: DsmoClient, graphs: GraphCache, s3: S3Client, store: ArtifactStore, run_id: str) -> RunPage:
    """The page of a run Temporal no longer has, from the trail it exported when it ended.

    Raises:
        RunNotFound: It exported no trail either.
    """
    view, trail = await dsmo.run(run_id).from_export()  # the export; the view `dsmo status` shows
    definition, svg = None, None
    try:
        definition, drawing = await graphs.get(str(view.config_ref))
        svg = graph.svg(definition, path=view.path, drawing=drawing)
    except (DsmoError, KeyError, ValueError):
        pass  # the page stands on the trail alone
    return RunPage(
        view=view,
        variables={},
        trail=trail,
        graph_svg=svg,
        definition=definition,
        artifacts=await asyncio.to_thread(_artifacts, trail, s3, store),
        parent=None,
        children=_children(trail),
        problems=[str(view.problem)],
        forks=[],
    )
