"""Temporal's remote codec protocol (POST /encode, POST /decode) over the DSMO encryption codec."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from starter.codec import EncryptionCodec


def create_codec_app(keys: list[tuple[str, bytes]], origins: list[str], token: str | None = None) -> FastAPI:
    """With ``token``, only requests bearing it are served (the Web UI can pass an access token)."""
    codec = EncryptionCodec(keys)
    app = FastAPI(title="DSMO codec server", version="1.0.0")

    @app.middleware("http")
    async def authorize(request: Request, call_next: Any) -> Any:
        if token and request.method != "OPTIONS":
            presented = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(presented, token):
                return JSONResponse(
                    status_code=401,
                    content={"error": {"code": "unauthenticated", "message": "a valid bearer token is required"}},
                )
        return await call_next(request)

    # The Web UI calls the codec from the browser, with its namespace header.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["POST", "OPTIONS"],
        allow_headers=["content-type", "x-namespace", "authorization"],
        allow_credentials=True,
    )

    async def convert(request: Request, decode: bool) -> dict[str, Any]:
        payloads = json_format.Parse(await request.body(), Payloads())
        done = await (codec.decode(payloads.payloads) if decode else codec.encode(payloads.payloads))
        result: dict[str, Any] = json_format.MessageToDict(Payloads(payloads=list(done)))
        return result

    @app.post("/decode")
    async def decode(request: Request) -> dict[str, Any]:
        return await convert(request, decode=True)

    @app.post("/encode")
    async def encode(request: Request) -> dict[str, Any]:
        return await convert(request, decode=False)

    return app


__all__ = ["Payload", "create_codec_app"]
