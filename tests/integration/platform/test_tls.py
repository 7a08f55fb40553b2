"""TLS options exercised against real handshakes: mTLS to Temporal, HTTPS to the S3 store.

Both go through `tests/tls_proxy.py` (the dev server has no TLS of its own); what is under test
is the client side DSMO configures from TEMPORAL_TLS_* and AWS_ENDPOINT_URL_S3 + AWS_CA_BUNDLE.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from botocore.exceptions import SSLError
from obstore.exceptions import GenericError

from dsmo.activities.artifacts import ArtifactStore
from dsmo.client.client_errors import TemporalUnavailable
from dsmo.client.dsmo_client import DsmoClient
from dsmo.config.settings import Settings
from dsmo.runtime.storage import artifact_store, s3_client
from dsmo.workflows.common.status import RunStatus
from dsmo.workflows.definition.model import parse_definition
from tests.conftest import Harness
from tests.tls_proxy import Pki, make_pki, tls_terminator

pytestmark = pytest.mark.integration

GREETING = {
    "agent": "tls-greeting",
    "start": "hello",
    "nodes": {"hello": {"actionType": "send_message", "parameters": {"to": "ann", "message": "over mTLS"}}},
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def mtls(settings: Settings, address: str, pki: Pki, *, with_client_cert: bool = True) -> Settings:
    return settings.with_changes(
        temporal={
            "address": address,
            "tls_ca": str(pki.ca),
            "tls_cert": str(pki.client_cert) if with_client_cert else "",
            "tls_key": str(pki.client_key) if with_client_cert else "",
            "tls_server_name": "localhost",
        }
    )


async def test_a_run_started_and_read_over_mtls(harness: Harness, pki: Pki) -> None:
    async with tls_terminator(harness.settings.temporal.address, pki, require_client_cert=True, alpn=["h2"]) as addr:
        client = await DsmoClient.connect(mtls(harness.settings, addr, pki))
        run_id = (await client.start(parse_definition(GREETING), {}, task_queue=harness.task_queue)).run_id
        harness.started.append(run_id)
        result = await client.result(run_id)
        assert result.status is RunStatus.COMPLETED
        assert [m["message"] for m in harness.messages(run_id)] == ["over mTLS"]


async def test_mtls_without_a_client_certificate_is_refused(harness: Harness, pki: Pki) -> None:
    async with tls_terminator(harness.settings.temporal.address, pki, require_client_cert=True, alpn=["h2"]) as addr:
        with pytest.raises(TemporalUnavailable, match="TEMPORAL_ADDRESS: cannot reach Temporal"):
            await DsmoClient.connect(mtls(harness.settings, addr, pki, with_client_cert=False))


async def test_tls_to_a_server_the_ca_does_not_vouch_for_is_refused(harness: Harness, pki: Pki, tmp_path: Path) -> None:
    other_ca = make_pki(tmp_path / "other")
    async with tls_terminator(harness.settings.temporal.address, pki, require_client_cert=True, alpn=["h2"]) as addr:
        settings = mtls(harness.settings, addr, pki).with_changes(temporal={"tls_ca": str(other_ca.ca)})
        with pytest.raises(TemporalUnavailable):
            await DsmoClient.connect(settings)


def _boto3_store(settings: Settings) -> ArtifactStore:
    return ArtifactStore(s3_client(settings), settings.store.bucket)


def _worker_store(settings: Settings) -> ArtifactStore:
    return artifact_store(settings)  # stage I/O through obstore


@pytest.mark.parametrize(
    ("make_store", "refusal"),
    [(_boto3_store, SSLError), (_worker_store, GenericError)],
    ids=["boto3", "obstore"],
)
async def test_artifacts_over_https_with_a_ca_bundle(
    stack_settings: Settings,
    pki: Pki,
    monkeypatch: pytest.MonkeyPatch,
    make_store: Callable[[Settings], ArtifactStore],
    refusal: type[Exception],
) -> None:
    async with tls_terminator(stack_settings.store.endpoint, pki, require_client_cert=False) as addr:
        settings = stack_settings.with_changes(store={"endpoint": f"https://{addr}"})
        key = f"tls-check/{uuid.uuid4().hex}.json"

        # Without the CA the store's certificate is not trusted: nothing is written.
        monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
        untrusted = make_store(settings)
        with pytest.raises(refusal, match=r"(?i)certificate"):
            await asyncio.to_thread(untrusted.put_json_once, key, {"secret": False})

        # AWS_CA_BUNDLE (read by botocore, passed to obstore) makes the same endpoint work.
        monkeypatch.setenv("AWS_CA_BUNDLE", str(pki.ca))
        trusted = make_store(settings)
        stored = await asyncio.to_thread(trusted.put_json_once, key, {"over": "https"})
        assert stored.created
        assert await asyncio.to_thread(trusted.read_json, stored.uri) == {"over": "https"}

    # The object is in the real store, as the plaintext endpoint sees it.
    plain = ArtifactStore(s3_client(stack_settings), stack_settings.store.bucket)
    assert await asyncio.to_thread(plain.read_json, plain.uri(key)) == {"over": "https"}
