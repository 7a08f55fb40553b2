"""An LLM processor for any OpenAI-compatible chat endpoint, held to a JSON schema.

The model is asked for JSON (`response_format: json_object`), with temperature 0 and a fixed
seed; its answer is validated by a pydantic schema (a failure is a contract violation, routed to
the fail-safe path) and the inference metadata (model, temperature, top_p, seed, prompt version)
is reported for the extended audit trail. The request, never the payload, is what is recorded.

The call goes out through the `llm` node's HTTP client (`dsmo.activities.llm_http`), on the
worker's event loop, and its answer is read under the same size cap (DSMO_LLM_MAX_RESPONSE_BYTES).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field, ValidationError

from dsmo.activities.llm_answers import TRANSIENT_STATUS, LlmUnavailable
from dsmo.activities.llm_http import DEFAULT_MAX_RESPONSE_BYTES, new_http_client, read_capped
from dsmo.activities.plugin_errors import ContractViolation, InvalidInput
from dsmo.activities.plugins import agent
from dsmo.activities.processors import ProcessorOutput
from dsmo.workflows.contracts.activity_io import StageMessage

PROMPT_VERSION = "summarize-v1"
SYSTEM_PROMPT = (
    "You summarise a document for a business workflow. Answer only with a JSON object with keys: "
    '"summary" (one sentence), "sentiment" ("positive", "neutral" or "negative") and "entities" (a list of names).'
)


class LlmAnswer(BaseModel):
    summary: str = Field(min_length=1, max_length=2000)
    sentiment: Literal["positive", "neutral", "negative"]
    entities: list[str] = Field(default_factory=list, max_length=100)


class LlmInput(BaseModel):
    text: str = Field(min_length=1, description="the text to summarise (the first 20,000 characters are sent)")


class LlmSummary(BaseModel):
    sentiment: Literal["positive", "neutral", "negative"]
    entityCount: int = Field(ge=0, description="names the model found")


NAME, VERSION = "llm-summarize", "1.0.0"
DESCRIPTION = "One-sentence summary, sentiment and named entities from an OpenAI-compatible chat model."


@dataclass(frozen=True)
class LlmProcessor:
    """The summariser on one endpoint (an async agent: the call holds no thread).

    Attributes:
        base_url: The OpenAI-compatible API root (``.../v1``).
        model: The model asked.
        api_key: Sent as a bearer token when set.
        temperature: Sampling temperature, recorded with the answer.
        top_p: Nucleus sampling, recorded with the answer.
        seed: The fixed seed, recorded with the answer.
        timeout: Seconds the call may take.
        max_response_bytes: The most of a response read (DSMO_LLM_MAX_RESPONSE_BYTES, as for `llm` nodes).
    """

    base_url: str
    model: str
    api_key: str = ""
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 7
    timeout: float = 60.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    async def __call__(self, document: Any, message: StageMessage) -> ProcessorOutput:
        """Summarise ``document["text"]``.

        Raises:
            InvalidInput: No text, or the endpoint refused the request (a 4xx other than 408/409/429).
            LlmUnavailable: The endpoint did not answer, answered 408/409/429/5xx, or no JSON.
            ContractViolation: The answer does not match `LlmAnswer`, or is larger than the cap.
        """
        text = document.get("text") if isinstance(document, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("input.text: a non-empty string is required")
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text[:20_000]}],
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "response_format": {"type": "json_object"},
        }
        reply = await self._post(body, message.idempotency_key)
        try:
            content = reply["choices"][0]["message"]["content"]
            answer = LlmAnswer.model_validate(json.loads(content))
        except (KeyError, IndexError, TypeError, ValueError, ValidationError) as err:
            raise ContractViolation(f"LLM answer does not match LlmAnswer: {str(err).splitlines()[0][:200]}") from None
        inference = {
            "model": reply.get("model", self.model),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "promptVersion": PROMPT_VERSION,
            **({"systemFingerprint": reply["system_fingerprint"]} if reply.get("system_fingerprint") else {}),
            **({"usage": reply["usage"]} if isinstance(reply.get("usage"), dict) else {}),
        }
        summary = {"sentiment": answer.sentiment, "entityCount": len(answer.entities)}
        return ProcessorOutput(document=answer.model_dump(), summary=summary, inference=inference)

    async def _post(self, body: dict[str, Any], key: str) -> dict[str, Any]:
        headers = {"Idempotency-Key": key}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            async with _client().stream("POST", url, json=body, headers=headers, timeout=self.timeout) as response:
                status, reason = response.status_code, response.reason_phrase
                raw, refused = await read_capped(response, self.max_response_bytes)
        except httpx.HTTPError as err:
            raise LlmUnavailable(f"LLM endpoint unreachable: {type(err).__name__}: {err}") from None
        if status in TRANSIENT_STATUS or status >= 500:
            raise LlmUnavailable(f"LLM endpoint answered {status} {reason}")
        if status >= 400:
            raise InvalidInput(f"LLM endpoint refused the request: {status} {reason}")
        if refused is not None:
            raise ContractViolation(f"LLM answer is larger than the {self.max_response_bytes:,}-byte cap; refused")
        try:
            reply = json.loads(raw)
        except (ValueError, RecursionError) as err:
            raise LlmUnavailable(f"LLM endpoint answered no JSON: {str(err)[:200]}") from None
        if not isinstance(reply, dict):
            raise ContractViolation("LLM endpoint answered something other than a JSON object")
        return reply


@functools.cache
def _client() -> httpx.AsyncClient:
    """One of the `llm` node's pooled clients, made on first use, for every summariser in this process."""
    return new_http_client()


@agent(NAME, version=VERSION, description=DESCRIPTION, input_schema=LlmInput, summary_schema=LlmSummary)
async def llm_summarize(document: Any, message: StageMessage) -> ProcessorOutput:
    """The summariser on the endpoint the worker's environment names (``DSMO_LLM_BASE_URL``)."""
    return await _configured()(document, message)


@functools.cache
def _configured() -> LlmProcessor:
    base_url = os.environ.get("DSMO_LLM_BASE_URL", "")
    if not base_url:
        raise InvalidInput(f"{NAME}: DSMO_LLM_BASE_URL is not set on this worker")
    return LlmProcessor(
        base_url,
        os.environ.get("DSMO_LLM_MODEL") or "gpt-4o-mini",
        os.environ.get("DSMO_LLM_API_KEY", ""),
        max_response_bytes=int(os.environ.get("DSMO_LLM_MAX_RESPONSE_BYTES") or DEFAULT_MAX_RESPONSE_BYTES),
    )
