"""The AES-GCM codec and the codec server (Temporal's remote codec protocol)."""

from __future__ import annotations

import base64

import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from dsmo.client.codec import CodecError, EncryptionCodec, keys_from_env, new_key, parse_keys
from dsmo.server.codec_server import create_codec_app

K1, K2 = ("k1", b"1" * 32), ("k2", b"2" * 32)
PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"secret": "s3cr3t"}')


async def test_round_trip_and_rotation() -> None:
    old = EncryptionCodec([K1])
    [sealed] = await old.encode([PLAIN])
    assert b"s3cr3t" not in sealed.data and sealed.metadata["encryption-key-id"] == b"k1"
    rotated = EncryptionCodec([K2, K1])  # a new key encrypts; the old one still decrypts
    assert (await rotated.decode([sealed]))[0] == PLAIN
    assert (await rotated.encode([PLAIN]))[0].metadata["encryption-key-id"] == b"k2"
    with pytest.raises(CodecError, match="unknown key 'k1'"):
        await EncryptionCodec([K2]).decode([sealed])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("k1", "id:base64key"),
        ("k1:@@@", "not valid base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "16, 24 or 32"),
    ],
)
def test_bad_keys_name_the_variable(text: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        parse_keys(text, source="DSMO_CODEC_KEYS")


def test_keys_from_env_and_file(tmp_path: object) -> None:
    key = new_key()
    assert keys_from_env({"DSMO_CODEC_KEYS": f"a:{key}"})[0][0] == "a"
    assert keys_from_env({}) == []


def _body(payloads: list[Payload]) -> str:
    return json_format.MessageToJson(Payloads(payloads=payloads))


def test_codec_server_decodes_for_the_ui_with_a_token() -> None:
    app = create_codec_app([K1], ["http://localhost:8233"], token="t0k")
    client = TestClient(app)
    encoded = client.post("/encode", content=_body([PLAIN]), headers={"Authorization": "Bearer t0k"})
    assert encoded.status_code == 200 and "s3cr3t" not in encoded.text
    sealed = json_format.ParseDict(encoded.json(), Payloads()).payloads
    decoded = client.post("/decode", content=_body(list(sealed)), headers={"Authorization": "Bearer t0k"})
    assert json_format.ParseDict(decoded.json(), Payloads()).payloads[0] == PLAIN
    assert client.post("/decode", content=_body(list(sealed))).status_code == 401
    # HTTP's schemes are case-insensitive: `bearer` is read as the ingress reads it.
    assert (
        client.post("/decode", content=_body(list(sealed)), headers={"Authorization": "bearer t0k"}).status_code == 200
    )
    preflight = client.options(
        "/decode", headers={"Origin": "http://localhost:8233", "Access-Control-Request-Method": "POST"}
    )
    assert preflight.headers["access-control-allow-origin"] == "http://localhost:8233"


def test_codec_server_answers_bad_requests_with_clear_errors_not_500() -> None:
    client = TestClient(create_codec_app([K1], ["http://localhost:8233"], token="t0k"), raise_server_exceptions=False)
    auth = {"Authorization": "Bearer t0k"}
    assert (
        client.post("/decode", content=_body([PLAIN]), headers=[(b"Authorization", "Bearer tök".encode())]).status_code
        == 401
    )
    malformed = client.post("/decode", content=b"{not json", headers=auth)
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_body"
    sealed = json_format.ParseDict(client.post("/encode", content=_body([PLAIN]), headers=auth).json(), Payloads())
    unknown_key = Payload(metadata={**sealed.payloads[0].metadata, "encryption-key-id": b"nobody"}, data=b"x" * 40)
    data = sealed.payloads[0].data  # one bit of its last byte flipped (a fixed byte may be the one there)
    altered = Payload(metadata=dict(sealed.payloads[0].metadata), data=data[:-1] + bytes([data[-1] ^ 1]))
    empty = Payload(metadata=dict(sealed.payloads[0].metadata), data=b"")
    for bad in (unknown_key, altered, empty):
        answer = client.post("/decode", content=_body([bad]), headers=auth)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "cannot_decode", answer.text
    huge = client.post("/decode", content=b"x" * (8 * 1024 * 1024 + 1), headers=auth)
    assert huge.status_code == 413


def test_codec_server_will_not_start_without_a_token() -> None:
    from click.testing import CliRunner

    from dsmo.cli.main import cli

    result = CliRunner().invoke(cli, ["codec-server"], env={"DSMO_CODEC_SERVER_TOKEN": ""})
    assert result.exit_code == 2 and "--insecure-no-token" in result.output
