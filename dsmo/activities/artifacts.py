"""The artifact store: JSON documents in an S3-compatible bucket, addressed by s3:// URIs.

Longer than most modules: `ArtifactStore` is one class (its write-once puts, sealed reads and the
requests beside them share one client and one cache), and a class is not spread across files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import obstore
from botocore.exceptions import ClientError
from cryptography.exceptions import InvalidTag
from obstore.exceptions import AlreadyExistsError

from dsmo.activities.artifact_cache import ImmutableCache
from dsmo.activities.sealing import SealedHeader, seal, sealed_header, unseal
from dsmo.activities.subject_keys import SubjectErased, SubjectKeyring
from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.contracts.subject_io import SubjectSeal

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef
    from obstore.store import S3Store


class ArtifactError(DsmoError):
    code = "artifact_error"


class ArtifactMissing(ArtifactError):
    code = "artifact_missing"


# Reading an object sealed with an erased subject's key raises this (subject_keys.py).
ArtifactErased = SubjectErased


@dataclass(frozen=True)
class StoredArtifact:
    uri: str
    sha256: str  # of the document (for a sealed artifact, of its plaintext)
    size: int
    created: bool  # False: the key already held an artifact, which was kept (write-once)
    matches: bool = True  # the artifact holds the document given (always, when created)


# Run inputs and stage outputs live under this prefix; they are write-once and never replaced.
ARTIFACT_PREFIX = "artifacts/"


def stage_output_key(workflow_version: str, run_id: str, stage: str, attempt: int) -> str:
    return f"{ARTIFACT_PREFIX}{workflow_version}/{run_id}/{stage}/attempt={attempt}/output.json"


def run_input_key(workflow_version: str, run_id: str) -> str:
    return f"{ARTIFACT_PREFIX}{workflow_version}/{run_id}/input.json"


def encode_json(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


class ArtifactStore:
    """Reads and write-once writes of JSON artifacts, keyed deterministically.

    With ``cache_bytes`` the store keeps the artifacts it writes under ``artifacts/`` (write-once,
    never replaced) in memory and serves later reads of them from there. Only what this store
    itself created is kept: a user's object, or another writer's, is always read from the bucket.
    Workers turn it on; tools that inspect the store do not, so they always see the bucket.

    With ``objects`` (an obstore S3 store on the same bucket) the calls every stage makes, the
    write-once put and the read, go through obstore's Rust client: ~0.1 ms of Python CPU per
    call against ~1.3 ms for boto3 (measured), and the GIL is released while it works. boto3
    stays for everything else (listing, metadata, replacing an audit file).
    """

    def __init__(
        self,
        s3: S3Client | Callable[[], S3Client],
        bucket: str,
        *,
        objects: S3Store | None = None,
        cache_bytes: int = 0,
        keks: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        # A factory defers creating the boto3 client (~0.3 s) until a call needs it: with
        # `objects`, preparing a run or running a stage never does.
        self._s3_factory = s3 if callable(s3) else None
        self._s3: S3Client | None = None if callable(s3) else s3
        self.bucket = bucket
        self.objects = objects
        self.cache = ImmutableCache(cache_bytes) if cache_bytes > 0 else None
        # Data subjects' keys: what sealed artifacts are written and read with.
        self.subjects = SubjectKeyring(self, keks)

    @property
    def s3(self) -> S3Client:
        if self._s3 is None:
            assert self._s3_factory is not None
            self._s3 = self._s3_factory()
        return self._s3

    def _cacheable(self, bucket: str, key: str) -> bool:
        return self.cache is not None and bucket == self.bucket and key.startswith(ARTIFACT_PREFIX)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def key_of(self, uri: str) -> tuple[str, str]:
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc or not parsed.path.strip("/"):
            raise ArtifactError(f"artifact URI {uri!r} is not of the form s3://bucket/key")
        return parsed.netloc, parsed.path.lstrip("/")

    def put_json_once(self, key: str, document: Any, *, seal: SubjectSeal | None = None) -> StoredArtifact:
        """Write ``document`` unless ``key`` exists (``If-None-Match: *``); never overwrite.

        With a ``seal`` (the run's data subject) the document is stored encrypted with the
        subject's data key (sealing.py).
        """
        return self.put_json_bytes_once(key, encode_json(document), seal=seal)

    def put_json_bytes_once(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/json",
        metadata: dict[str, str] | None = None,
        seal: SubjectSeal | None = None,
    ) -> StoredArtifact:
        """Write ``body`` unless ``key`` exists; the conditional put makes concurrent writers agree."""
        stored = self._sealed(key, body, seal)
        # The object's metadata names the bytes stored; the answer names the document (the trail
        # keeps it: an archive exported before an erasure still proves what a sealed output held).
        digest = hashlib.sha256(body).hexdigest()
        stored_digest = digest if stored is body else hashlib.sha256(stored).hexdigest()  # hashed once if unsealed
        if not self.put_if_absent(key, stored, content_type, {**(metadata or {}), "sha256": stored_digest}):
            existing = self.stored_or_none(key)
            if existing is None:  # deleted since: rare, and a retry writes it
                raise ArtifactError(f"artifact {self.uri(key)} vanished while it was written")
            document = self._opened(key, existing, seal)
            digest = hashlib.sha256(document).hexdigest()
            return StoredArtifact(self.uri(key), digest, len(document), created=False, matches=document == body)
        if self.cache is not None and self._cacheable(self.bucket, key):
            self.cache.put(key, stored)
        return StoredArtifact(self.uri(key), digest, len(body), created=True)

    def _sealed(self, key: str, body: bytes, seal_with: SubjectSeal | None) -> bytes:
        if seal_with is None:
            return body
        header = SealedHeader(seal_with.fingerprint, seal_with.key_id)
        return seal(body, self.subjects.data_key(seal_with), header, key)

    def _opened(self, key: str, stored: bytes, seal_with: SubjectSeal | None) -> bytes:
        """The plaintext of what is stored at ``key``: opened with the run's seal or the key store.

        Raises:
            ArtifactErased: It is sealed with the key of a subject since erased.
        """
        header = sealed_header(stored)
        if header is None:
            return stored
        if seal_with is not None and (seal_with.fingerprint, seal_with.key_id) == (header.fingerprint, header.key_id):
            data_key = self.subjects.data_key(seal_with)
        else:
            try:
                data_key = self.subjects.current_key(header)
            except SubjectErased:
                raise SubjectErased(f"artifact {self.uri(key)} is erased: its data subject was erased") from None
        try:
            return unseal(stored, data_key, key)
        except InvalidTag:
            raise ArtifactError(f"artifact {self.uri(key)} does not open with its subject's key") from None

    def put_json_bytes(self, key: str, body: bytes, *, seal: SubjectSeal | None = None) -> StoredArtifact:
        """Write ``body`` at ``key`` whatever is there (only for an object no run refers to)."""
        stored = self._sealed(key, body, seal)
        metadata = {"sha256": hashlib.sha256(stored).hexdigest()}
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=stored, ContentType="application/json", Metadata=metadata)
        if self.cache is not None and self._cacheable(self.bucket, key):
            self.cache.put(key, stored)
        return StoredArtifact(self.uri(key), hashlib.sha256(body).hexdigest(), len(body), created=True)

    def put_if_absent(
        self, key: str, body: bytes, content_type: str = "application/json", metadata: dict[str, str] | None = None
    ) -> bool:
        """One conditional PUT (``If-None-Match: *``); False when the key already holds an object."""
        if self.objects is not None:
            try:
                # One request whatever the size: a multipart upload cannot be conditional.
                obstore.put(
                    self.objects,
                    key,
                    body,
                    mode="create",
                    attributes={"Content-Type": content_type, **(metadata or {})},
                    use_multipart=False,
                )
            except AlreadyExistsError:
                return False
            return True
        try:
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                IfNoneMatch="*",
                Metadata=metadata or {},
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
                raise
            return False
        return True

    async def put_new_async(self, key: str, body: bytes, content_type: str, metadata: dict[str, str]) -> bool | None:
        """`put_json_bytes_once` of an unsealed body from the loop (same metadata, no thread): True
        when written; False when ``key`` holds an object, None without obstore (take the thread path)."""
        if self.objects is None:
            return None
        attributes = {"Content-Type": content_type, **metadata, "sha256": hashlib.sha256(body).hexdigest()}
        try:
            await obstore.put_async(self.objects, key, body, mode="create", attributes=attributes, use_multipart=False)
        except AlreadyExistsError:
            return False
        return True

    def exists(self, key: str) -> bool:
        """Whether ``key`` holds an object in this bucket (one HEAD request)."""
        if self.objects is not None:
            try:
                obstore.head(self.objects, key)
            except FileNotFoundError:  # obstore's "not found"
                return False
            return True
        try:
            self.s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    def metadata(self, key: str) -> dict[str, str]:
        """The user metadata (``x-amz-meta-*``) of an existing object."""
        found: dict[str, str] = self.s3.head_object(Bucket=self.bucket, Key=key).get("Metadata", {})
        return found

    def read_bytes(self, uri: str, *, seal: SubjectSeal | None = None) -> bytes:
        """The artifact's content; a sealed one is opened (with ``seal`` when it is the run's own).

        Raises:
            ArtifactMissing: Nothing is stored there.
            ArtifactErased: It belongs to a data subject since erased.
        """
        bucket, key = self.key_of(uri)
        return self._opened(key, self._read_stored(bucket, key), seal)

    def stored_or_none(self, key: str) -> bytes | None:
        """The bytes stored at ``key`` in this bucket as they are (sealed or not), or None."""
        try:
            return self._read_stored(self.bucket, key)
        except ArtifactMissing:
            return None

    def _read_stored(self, bucket: str, key: str) -> bytes:
        uri = f"s3://{bucket}/{key}"
        if self.cache is not None and self._cacheable(bucket, key) and (cached := self.cache.get(key)) is not None:
            return cached
        if self.objects is not None and bucket == self.bucket:
            try:
                return bytes(obstore.get(self.objects, key).bytes())
            except FileNotFoundError:  # obstore's "not found"
                raise ArtifactMissing(f"artifact {uri} does not exist") from None
        try:
            body: bytes = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise ArtifactMissing(f"artifact {uri} does not exist") from None
            raise
        return body

    def read_json(self, uri: str, *, seal: SubjectSeal | None = None) -> Any:
        data = self.read_bytes(uri, seal=seal)
        try:
            return json.loads(data)
        except ValueError:
            raise ArtifactError(f"artifact {uri} is not valid JSON") from None

    def delete_keys(self, keys: Sequence[str]) -> None:
        """Delete these objects of the bucket (one already gone is fine)."""
        for start in range(0, len(keys), 1000):  # S3's limit per request
            chunk: list[ObjectIdentifierTypeDef] = [{"Key": key} for key in keys[start : start + 1000]]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})

    def list_modified(self, prefix: str) -> list[tuple[str, datetime]]:
        """The keys under ``prefix`` with when each was last written, in key order."""
        found: list[tuple[str, datetime]] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend((item["Key"], item["LastModified"]) for item in page.get("Contents", []))
        return found

    def list_uris(self, prefix: str) -> list[str]:
        uris: list[str] = []
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            uris.extend(self.uri(item["Key"]) for item in page.get("Contents", []))
        return sorted(uris)
