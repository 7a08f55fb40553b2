"""W5's thread-pool contender: the same model call as an `llm` stage, made by a plain (blocking)
agent on the worker's processor threads. Loaded with `DSMO_LOAD=bench.studies.w5.llm_agents`."""

from __future__ import annotations

import os
import threading
from typing import Any

import httpx

import dsmo

_local = threading.local()


def _client() -> httpx.Client:
    if not hasattr(_local, "client"):
        _local.client = httpx.Client(timeout=120.0)
    client: httpx.Client = _local.client
    return client


@dsmo.agent("llm-blocking", version="1.0.0")
def llm_blocking(document: dict[str, Any], message: dsmo.StageMessage) -> tuple[dict[str, Any], dict[str, Any]]:
    """Asks the chat endpoint, holding a processor thread for the whole call."""
    url = os.environ["DSMO_LLM_BASE_URL"].rstrip("/") + "/chat/completions"
    body = {"model": "bench", "messages": [{"role": "user", "content": f"Classify: {document['text']}"}]}
    response = _client().post(url, json=body)
    response.raise_for_status()
    content = response.json()["choices"][0]["message"]["content"]
    return {"text": content}, {"chars": len(content)}
