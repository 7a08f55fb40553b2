"""The object store clients, built from Settings: boto3 for listing and small objects, obstore
for the worker's stage I/O, and the ArtifactStore over both."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from obstore.store import S3Store

from dsmo.activities.artifact_cache import MIB
from dsmo.activities.artifacts import ARTIFACT_PREFIX, ArtifactErased, ArtifactMissing, ArtifactStore
from dsmo.activities.definition_store import config_key
from dsmo.config.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


# The store and its errors are re-exported: the CLI, the ingress and the console name them through
# this module, not through `dsmo.activities` (an import-linter contract holds them to it).
__all__ = [
    "ARTIFACT_PREFIX",
    "ArtifactErased",
    "ArtifactMissing",
    "ArtifactStore",
    "artifact_store",
    "config_key",
    "object_store",
    "s3_client",
]


def s3_client(settings: Settings) -> S3Client:
    """A boto3 S3 client for the configured endpoint (path-style, few quick retries)."""
    return boto3.client(
        "s3",
        endpoint_url=settings.store.endpoint,
        aws_access_key_id=settings.store.access_key,
        aws_secret_access_key=settings.store.secret_key,
        region_name=settings.store.region,
        config=Config(
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
            # SeaweedFS (like MinIO) serves path-style addressing on a bare host:port.
            s3={"addressing_style": "path"},
            max_pool_connections=32,
            # Checksums only where the API requires them: less CPU per call (measured), and
            # S3-compatible stores that lack the newer checksum headers keep working.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def object_store(settings: Settings) -> S3Store:
    """The artifact bucket through obstore (the worker's hot path), configured as `s3_client`."""
    client_options: dict[str, Any] = {
        "allow_http": urlparse(settings.store.endpoint).scheme == "http",
        "connect_timeout": timedelta(seconds=5),
        "timeout": timedelta(seconds=30),
    }
    # boto3 trusts AWS_CA_BUNDLE by itself; obstore is told.
    if ca_bundle := os.environ.get("AWS_CA_BUNDLE"):
        client_options["root_certificate"] = Path(ca_bundle).read_bytes()
    return S3Store(
        settings.store.bucket,
        endpoint=settings.store.endpoint,
        access_key_id=settings.store.access_key,
        secret_access_key=settings.store.secret_key,
        region=settings.store.region,
        virtual_hosted_style_request=False,
        client_options=client_options,  # type: ignore[arg-type]
        # Like boto3's standard mode here: a few quick retries; the activity retries the rest.
        retry_config={"max_retries": 2, "retry_timeout": timedelta(seconds=10)},
    )


def artifact_store(settings: Settings, *, cache: bool = False) -> ArtifactStore:
    """The store a worker uses: obstore for stage I/O, boto3 for the rest, optionally cached."""
    return ArtifactStore(
        lambda: s3_client(settings),
        settings.store.bucket,
        objects=object_store(settings),
        cache_bytes=settings.store.cache_mb * MIB if cache else 0,
        keks=settings.codec.subject_keks(settings.state_dir),
    )
