"""Every model call's answer is read under the cap: a successful one above it is refused unread,
an error's body is cut there, and the clients ask for uncompressed answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx

from dsmo.activities.llm_http import new_http_client, read_capped


class Chunks(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body streamed in pieces, with no Content-Length: the cap is met while reading."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = pieces

    def __iter__(self) -> Iterator[bytes]:
        yield from self.pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


async def read(response: httpx.Response, cap: int) -> tuple[bytes, str | None]:
    transport = httpx.MockTransport(lambda request: response)
    async with httpx.AsyncClient(transport=transport) as client, client.stream("POST", "http://llm/v1") as streamed:
        return await read_capped(streamed, cap)


async def test_an_answer_within_the_cap_is_read_whole() -> None:
    assert await read(httpx.Response(200, stream=Chunks(b'{"a":', b" 1}")), cap=64) == (b'{"a": 1}', None)


async def test_a_successful_answer_above_the_cap_is_refused_unread() -> None:
    body, refused = await read(httpx.Response(200, stream=Chunks(b"x" * 600, b"y" * 600)), cap=1024)
    assert body == b"" and refused is not None
    assert "larger than the 1,024-byte cap (DSMO_LLM_MAX_RESPONSE_BYTES)" in refused


async def test_a_declared_length_above_the_cap_is_refused_before_reading() -> None:
    body, refused = await read(httpx.Response(200, content=b"z" * 2048), cap=1024)
    assert body == b"" and refused is not None and "declares 2,048 bytes, above the 1,024-byte cap" in refused


async def test_an_errors_body_is_cut_at_the_cap_not_refused() -> None:
    body, refused = await read(httpx.Response(503, stream=Chunks(b"e" * 800, b"f" * 800)), cap=1024)
    assert refused is None and len(body) == 1024


async def test_the_clients_ask_for_uncompressed_answers() -> None:
    client = new_http_client()
    try:
        assert client.headers["Accept-Encoding"] == "identity"
    finally:
        await client.aclose()
