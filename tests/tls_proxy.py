"""TLS in front of the embedded stack, for tests: a throwaway PKI and a TLS-terminating proxy.

The Temporal dev server has no TLS options and the tests share one SeaweedFS, so the TLS side is a
small asyncio proxy: it does the handshake (optionally requiring a client certificate signed by
the test CA: mTLS), then pipes the decrypted bytes to the plaintext server. That exercises what
DSMO owns — its clients' TLS settings — against a real handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


def make_pki(folder: Path) -> Pki:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate, all valid for a day."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("dsmo test CA"))
        .issuer_name(_name("dsmo test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage: x509.ObjectIdentifier) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return cert, key

    folder.mkdir(parents=True, exist_ok=True)
    _write(folder / "ca.pem", ca)
    server, server_key = leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH)
    _write(folder / "server.pem", server, server_key)
    client, client_key = leaf("dsmo-worker", ExtendedKeyUsageOID.CLIENT_AUTH)
    _write(folder / "client.pem", client, client_key)
    return Pki(
        folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "client.pem", folder / "client.key"
    )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@contextlib.asynccontextmanager
async def tls_terminator(
    target: str, pki: Pki, *, require_client_cert: bool, alpn: list[str] | None = None
) -> AsyncIterator[str]:
    """Serve TLS on a free loopback port in front of ``target`` (host:port or URL); yields host:port."""
    parsed = urlparse(target if "://" in target else f"tcp://{target}")
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 0
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    if alpn:
        context.set_alpn_protocols(alpn)
    tasks: set[asyncio.Task[None]] = set()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        for task in (
            asyncio.create_task(_pipe(client_reader, upstream_writer)),
            asyncio.create_task(_pipe(upstream_reader, client_writer)),
        ):
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    address = server.sockets[0].getsockname()
    try:
        yield f"127.0.0.1:{address[1]}"
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
