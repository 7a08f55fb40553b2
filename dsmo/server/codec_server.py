"""Temporal's remote codec protocol (POST /encode, POST /decode) over the DSMO encryption codec."""

from __future__ import annotations

import hmac
from typing import Any

from cryptography.exceptions import InvalidTag
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload, Payloads

from dsmo.client.codec import CodecError, EncryptionCodec
from dsmo.server.api_keys import bearer_credential

# Temporal's payloads are at most 2 MB each; a request of several is capped well above that.
MAX_BODY_BYTES = 8 * 1024 * 1024


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message}})


def create_codec_app(keys: list[tuple[str, bytes]], origins: list[str], token: str | None = None) -> FastAPI:
    """With ``token``, only requests bearing it are served (the Web UI can pass an access token)."""
    codec = EncryptionCodec(keys)
    app = FastAPI(title="DSMO codec server", version="1.0.0", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def authorize(request: Request, call_next: Any) -> Any:
        if token and request.method != "OPTIONS":
            presented = bearer_credential(request.headers.get("authorization"))
            # Bytes: compare_digest refuses non-ASCII str (a 500 for any such header otherwise).
            if not hmac.compare_digest(presented.encode(), token.encode()):
                return _error(401, "unauthenticated", "a valid bearer token is required")
        return await call_next(request)

    # The Web UI calls the codec from the browser, with its namespace header.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["POST", "OPTIONS"],
        allow_headers=["content-type", "x-namespace", "authorization"],
        allow_credentials=True,
    )

    async def convert(request: Request, decode: bool) -> Any:
        body = bytearray()
        async for chunk in request.stream():  # read no further than the cap
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return _error(413, "too_large", f"body is over the {MAX_BODY_BYTES}-byte limit")
        try:
            payloads = json_format.Parse(bytes(body), Payloads())
        except (json_format.ParseError, UnicodeDecodeError, ValueError) as err:
            return _error(400, "invalid_body", f"body: not a Payloads JSON document ({str(err)[:120]})")
        try:
            done = await (codec.decode(payloads.payloads) if decode else codec.encode(payloads.payloads))
        except CodecError as err:
            return _error(400, "cannot_decode", str(err))
        except (InvalidTag, ValueError, DecodeError):
            return _error(400, "cannot_decode", "a payload could not be decrypted (wrong key, or altered data)")
        result: dict[str, Any] = json_format.MessageToDict(Payloads(payloads=list(done)))
        return result

    @app.post("/decode")
    async def decode(request: Request) -> Any:
        return await convert(request, decode=True)

    @app.post("/encode")
    async def encode(request: Request) -> Any:
        return await convert(request, decode=False)

    return app


__all__ = ["Payload", "create_codec_app"]
