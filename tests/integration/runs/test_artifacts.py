"""The worker's artifact store: obstore for stage I/O, write-once semantics, the immutable cache."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore
from dsmo.activities.messaging import FileChannel
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store, s3_client
from dsmo.worker import build_worker
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness

pytestmark = pytest.mark.integration


@pytest.fixture
def cached(stack_settings: Settings) -> ArtifactStore:
    store = artifact_store(stack_settings, cache=True)
    assert store.objects is not None and store.cache is not None
    return store


@pytest.fixture
def bucket_view(stack_settings: Settings) -> ArtifactStore:
    """boto3 only, no cache: what any other client sees in the bucket."""
    return ArtifactStore(s3_client(stack_settings), stack_settings.store.bucket)


def test_write_once_through_obstore(cached: ArtifactStore, bucket_view: ArtifactStore) -> None:
    key = f"artifacts/test-store/{uuid.uuid4().hex}/output.json"
    first = cached.put_json_once(key, {"n": 1})
    second = cached.put_json_once(key, {"n": 2})
    assert first.created and not second.created and second.sha256 == first.sha256
    assert bucket_view.read_json(first.uri) == {"n": 1}
    assert bucket_view.metadata(key)["sha256"] == first.sha256
    assert bucket_view.s3.head_object(Bucket=bucket_view.bucket, Key=key)["ContentType"] == "application/json"
    with pytest.raises(ArtifactMissing, match="does not exist"):
        cached.read_bytes(cached.uri(f"artifacts/test-store/{uuid.uuid4().hex}/missing.json"))


def test_what_the_store_wrote_is_read_from_memory(cached: ArtifactStore, bucket_view: ArtifactStore) -> None:
    assert cached.cache is not None
    key = f"artifacts/test-store/{uuid.uuid4().hex}/output.json"
    stored = cached.put_json_once(key, {"kept": True})
    hits = cached.cache.hits
    assert cached.read_json(stored.uri) == {"kept": True} == bucket_view.read_json(stored.uri)
    assert cached.cache.hits == hits + 1


def test_objects_the_store_did_not_create_are_always_read_from_the_bucket(
    cached: ArtifactStore, bucket_view: ArtifactStore
) -> None:
    assert cached.cache is not None
    # Written by someone else, then replaced: the store must see the replacement.
    key = f"artifacts/test-store/{uuid.uuid4().hex}/user.json"
    bucket_view.s3.put_object(Bucket=bucket_view.bucket, Key=key, Body=b'{"v": 1}')
    assert cached.read_json(cached.uri(key)) == {"v": 1}
    bucket_view.s3.put_object(Bucket=bucket_view.bucket, Key=key, Body=b'{"v": 2}')
    assert cached.read_json(cached.uri(key)) == {"v": 2}
    # Outside artifacts/ (audit trails can be rewritten by their own run) nothing is kept either.
    audit = f"audit/test-store-{uuid.uuid4().hex}.jsonl"
    cached.put_json_bytes_once(audit, b"{}\n", content_type="application/x-ndjson")
    assert audit not in cached.cache._items
    # A write that lost the race keeps the winner's object, and does not cache the loser's.
    raced = f"artifacts/test-store/{uuid.uuid4().hex}/raced.json"
    bucket_view.put_json_once(raced, {"winner": True})
    assert not cached.put_json_once(raced, {"winner": False}).created
    assert cached.read_json(cached.uri(raced)) == {"winner": True}


async def test_a_run_reads_its_stage_inputs_from_the_worker_cache(
    harness: Harness, cached: ArtifactStore, bucket_view: ArtifactStore
) -> None:
    assert cached.cache is not None
    definition = parse_definition(
        {
            "agent": "cache-check",
            "start": "A",
            "nodes": {
                "A": {"actionType": "run_agent", "agent": "text-extract", "next": "B"},
                "B": {"actionType": "run_agent", "agent": "rule-classify", "input": "{{stages.A.outputUri}}"},
            },
        }
    )
    queue = f"cache-{uuid.uuid4().hex[:8]}"
    async with build_worker(
        harness.dsmo.temporal, task_queue=queue, store=cached, channel=FileChannel(harness.outbox), sandboxed=False
    ):
        hits = cached.cache.hits
        run_id = (
            await harness.dsmo.start(
                definition, {"text": "Invoice 12.50 EUR from billing@example.com"}, task_queue=queue
            )
        ).run_id
        result = await harness.dsmo.result(run_id)
    assert result.status is RunStatus.COMPLETED
    # B read A's output from memory; A read the run's input from the bucket (the starter wrote it).
    assert cached.cache.hits - hits == 1
    outputs = await asyncio.to_thread(bucket_view.list_uris, f"artifacts/{definition.workflow_version}/{run_id}/")
    assert [uri.rsplit(f"{run_id}/", 1)[1] for uri in outputs] == [
        "A/attempt=1/output.json",
        "B/attempt=1/output.json",
        "input.json",
    ]
    for uri in outputs:  # what the bucket holds is what the worker kept
        assert cached.read_bytes(uri) == bucket_view.read_bytes(uri)
