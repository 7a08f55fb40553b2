"""The `llm` node's stage: render the prompts, ask an OpenAI-compatible chat endpoint, hold the
answer to the node's schema, and record every call.

Calls go out on the worker's event loop through a few shared `httpx.AsyncClient`s (uncompressed),
so a worker holds as many model calls in flight as it accepts activities. Each call leaves one
write-once artifact beside the attempt's output: the request as sent and the response as received.
An answer that does not match the schema is sent back with the validation error, up to the node's
`retries`, then the stage is a contract violation (the fail-safe route). A repair is a model call
like any: it is made only while the run's budget and the visit's (`LlmCall.budgets`) are not
spent; once one is, the attempt stops there and commits without an answer, saying why
(`REPAIRS_STOPPED`), and the run routes the spent budget. A 408, 409, 429 or 5xx
answer, or no answer, is transient: the orchestrator retries the stage.

A response is read as it streams in, up to `max_response_bytes` (DSMO_LLM_MAX_RESPONSE_BYTES): a
longer one is refused there, recorded, and the stage is a contract violation with no repair call
(it would send the answer back). Answers are parsed and checked on the I/O threads, not the loop.

A replay never calls a model: its call names the original run, and each request is answered by
the original's recorded response for the same stage visit and call number, read from the attempt
that visit committed (`LlmCall.recorded_at`), under the version and run that recorded it.

Longer than most modules: one attempt's calls (live, streamed or answered from the record) and
their records are one sequence, read here in the order it runs.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from dsmo.activities.artifacts import ArtifactMissing, ArtifactStore, encode_json, stage_output_key
from dsmo.activities.contract_schemas import SchemaDoesNotCompile, compiled_schema
from dsmo.activities.llm_answers import add_usage, answer_summary, cost_usd
from dsmo.activities.llm_http import CLIENT_POOLS, DEFAULT_MAX_RESPONSE_BYTES, new_http_client, post_answer
from dsmo.activities.llm_tools import conversation_messages, judged
from dsmo.activities.plugin_errors import ContractViolation, InvalidInput
from dsmo.activities.processors import ProcessorOutput
from dsmo.activities.progress_log import ProgressLog, closing, task_progress_folder
from dsmo.workflows.common.errors import TemplateError
from dsmo.workflows.common.templating import render
from dsmo.workflows.contracts.activity_io import StageTask
from dsmo.workflows.contracts.llm_call import REPAIRS_STOPPED, LlmCall, SpendLimit
from dsmo.workflows.definition.tools import add_spend

IO = Callable[..., Awaitable[Any]]  # runs a blocking store call off the event loop
CALL_RECORD_KIND = "dsmo.llm-call/v1"


@dataclass(frozen=True)
class LlmEndpoint:
    """Where a worker's `llm` stages send their calls (from its settings, never a definition).

    Attributes:
        base_url: The OpenAI-compatible API root (``.../v1``); empty when none is configured.
        api_key: Sent as a bearer token when set.
        default_model: The model of a node that names none.
        aliases: Model aliases a node may name instead of a model (``fast`` -> ``gpt-4o-mini``).
        max_response_bytes: The most of a response a call reads; a longer one is refused.
        prices: (input, output) USD per million tokens by model: a priced call records ``costUsd``.
    """

    base_url: str
    api_key: str = ""
    default_model: str = "gpt-4o-mini"
    aliases: Mapping[str, str] = field(default_factory=dict)
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def model(self, requested: str | None) -> str:
        name = requested or self.default_model
        return self.aliases.get(name, name)


@dataclass(frozen=True)
class LlmAttempt:
    """An `llm` stage attempt's answer, and what goes with it.

    Attributes:
        output: The answer as the stage's output; its ``inference`` (model, prompt hash,
            tokens) is stored with it.
        calls: What only the audit trail records: latency, whether recorded responses answered,
            where the calls are stored. Kept apart so a replay that gets the same answers from
            the recorded responses writes a byte-identical output.
        unwritten: The answering call's record (key, document), for the caller to write before
            the output, in the same trip to the I/O threads.
    """

    output: ProcessorOutput
    calls: dict[str, Any]
    unwritten: tuple[str, dict[str, Any]]


@dataclass
class _Exchange:
    """One call's record: what went out and what came back."""

    number: int
    request: dict[str, Any]
    status: int | None = None
    body: str = ""
    latency_ms: float = 0.0
    error: str | None = None
    refused: str | None = None  # why the response was not read whole (above the size cap)
    recorded: str | None = None  # the original's response artifact a replay answered from

    def record(self) -> dict[str, Any]:
        response: dict[str, Any] = {"status": self.status, "body": self.body, "latencyMs": round(self.latency_ms, 1)}
        if self.error is not None:
            response["error"] = self.error
        if self.refused is not None:
            response["refused"] = self.refused
        if self.recorded is not None:
            response["recordedFrom"] = self.recorded
        return {"kind": CALL_RECORD_KIND, "request": self.request, "response": response}


class LlmStage:
    """Runs `llm` stages for one worker: a few HTTP clients (see `CLIENT_POOLS`), one artifact store."""

    def __init__(self, endpoint: LlmEndpoint, store: ArtifactStore, clients: Sequence[httpx.AsyncClient] = ()) -> None:
        self.endpoint = endpoint
        self.store = store
        self.clients = list(clients) or [new_http_client() for _ in range(CLIENT_POOLS)]
        self._turn = itertools.count()

    async def run(self, task: StageTask, document: Any, io: IO) -> LlmAttempt:
        """One stage attempt: the answer as the output document, its short fields as the summary.

        Every call is recorded whatever follows it, but the record of the one whose answer is
        taken is left for the caller to write with the output (`LlmAttempt.unwritten`).

        Raises:
            InvalidInput: A template names a missing variable, the outputSchema does not compile,
                no endpoint is configured, the endpoint refused the request (4xx), or a replay
                finds no recorded response.
            LlmUnavailable: The endpoint did not answer, or answered 408/409/429/5xx.
            ContractViolation: The answer still breaks the schema after the node's retries, or
                the response is larger than the endpoint's cap.
        """
        call = task.llm
        assert call is not None
        messages = [*self._messages(call, document), *await self._conversation(call, task, io)]
        model = self.endpoint.model(call.model)
        try:
            schema = compiled_schema(encode_json(call.output_schema)) if call.output_schema is not None else None
        except SchemaDoesNotCompile as err:  # published before a rule it breaks (an RE2-less pattern)
            raise InvalidInput(f"llm outputSchema: {err}") from None
        folder = _attempt_folder(task, task.run_id)
        recorded_folder = self._recorded_folder(task, call)
        if recorded_folder is None and not self.endpoint.base_url:
            raise InvalidInput("llm stage: no endpoint is configured on this worker (DSMO_LLM_BASE_URL)")
        exchanges: list[_Exchange] = []
        # Tokens as they arrive, for the run's live stream (progress_log.py): never a sealed run's.
        live = call.stream and recorded_folder is None and task.seal is None
        progress = ProgressLog(self.store, task_progress_folder(task), io) if live else None
        usage: dict[str, int] = {}
        prompt_sha = hashlib.sha256(encode_json(messages)).hexdigest()
        stopped: str | None = None  # why a spent budget stopped the repairs
        async with closing(progress):  # on failure too: its flusher stops with the attempt
            for number in range(1, call.retries + 2):
                exchange = _Exchange(number, _request(call, model, messages, schema is not None, progress is not None))
                exchanges.append(exchange)
                if recorded_folder is not None:
                    await self._recorded(exchange, recorded_folder, io)
                else:
                    await self._send(exchange, task.idempotency_key, progress)
                # One write-once artifact per call: the request as sent, the response as received. The
                # call whose answer is taken is written with the output (`LlmAttempt.unwritten`).
                record = (f"{folder}llm/{number}.json", exchange.record())
                try:
                    if exchange.refused is not None:
                        raise ContractViolation(f"llm: {exchange.refused}")
                    # On the I/O threads: parsing a large answer, or checking it, must not hold the
                    # event loop every other call and stage on this worker shares.
                    content, reply, problem, answer, turn = await io(
                        judged, exchange.status, exchange.body, exchange.error, schema, call
                    )
                except Exception:
                    await io(functools.partial(self.store.put_json_once, *record, seal=task.seal))
                    raise
                add_usage(usage, reply)
                if problem is None:
                    break
                if number <= call.retries:
                    stopped = _spent(call.budgets, self._spend(reply, model, usage, number))
                    if stopped is not None:
                        break  # no repair: this call's record is written with the output, as an answer's
                await io(functools.partial(self.store.put_json_once, *record, seal=task.seal))
                if number > call.retries:
                    tries = "1 answer" if number == 1 else f"{number} answers"
                    raise ContractViolation(f"llm: {tries} did not match outputSchema; the last: {problem}")
                messages = [
                    *messages,
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"Your answer is not valid: {problem}. Answer again with only a JSON object "
                        "that matches the schema.",
                    },
                ]
        output = ProcessorOutput(
            document=answer,
            summary=turn if turn is not None else answer_summary(answer, call.summary_fields),
            inference={
                "model": reply.get("model", model),
                "requestedModel": model,
                "temperature": call.temperature,
                "maxTokens": call.max_tokens,
                "promptSha256": prompt_sha,
                **self._spend(reply, model, usage, len(exchanges)),
                **({"toolCalls": len(turn["toolCalls"])} if turn is not None else {}),
                # An answer still invalid when a budget stopped its repairs (the trail's, so no
                # words of the model's): the run routes the budget.
                **({REPAIRS_STOPPED: stopped} if stopped is not None else {}),
            },
        )
        calls = {
            "latencyMs": round(sum(exchange.latency_ms for exchange in exchanges), 1),
            "recorded": any(exchange.recorded for exchange in exchanges),
            "artifacts": [self.store.uri(f"{folder}llm/")],
        }
        return LlmAttempt(output, calls, unwritten=record)

    def _spend(self, reply: dict[str, Any], model: str, usage: dict[str, int], calls: int) -> dict[str, Any]:
        """What ``calls`` calls that used ``usage`` spent, as the inference says it (`add_spend` reads it)."""
        # Priced by the model that answered, else the one asked for (an alias's model).
        prices = self.endpoint.prices
        cost = cost_usd(prices, str(reply.get("model", model)), usage)
        cost = cost if cost is not None else cost_usd(prices, model, usage)
        return {"usage": dict(usage), "calls": calls, **({"costUsd": cost} if cost is not None else {})}

    def _messages(self, call: LlmCall, document: Any) -> list[dict[str, str]]:
        context = {**call.variables, "input": document}
        try:
            system = render(call.system, context) if call.system else None
            prompt = render(call.prompt, context)
        except TemplateError as err:
            raise InvalidInput(f"llm prompt: {err}") from None
        return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]

    async def _conversation(self, call: LlmCall, task: StageTask, io: IO) -> list[dict[str, Any]]:
        """The earlier turns' messages (answers with their calls, then the calls' results), read
        from the store: the conversation is never in the workflow's history."""
        if not call.conversation:
            return []

        def read() -> list[tuple[dict[str, Any], list[dict[str, Any] | None]]]:
            return [
                (
                    self.store.read_json(turn.answer_uri, seal=task.seal)["output"],
                    [
                        None if ref.uri is None else self.store.read_json(ref.uri, seal=task.seal)
                        for ref in turn.results
                    ],
                )
                for turn in call.conversation
            ]

        return conversation_messages(await io(read))

    async def _send(self, exchange: _Exchange, idempotency_key: str, progress: ProgressLog | None = None) -> None:
        headers = {"Idempotency-Key": f"{idempotency_key}:{exchange.number}"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        url = self.endpoint.base_url.rstrip("/") + "/chat/completions"
        started = time.perf_counter()
        try:
            client = self.clients[next(self._turn) % len(self.clients)]
            on_text = None
            if progress is not None:
                number = exchange.number

                async def on_text(text: str) -> None:
                    await progress.add({"kind": "token", "text": text, "call": number})

            answer = await post_answer(
                client, url, exchange.request, headers, self.endpoint.max_response_bytes, on_text
            )
            exchange.status, exchange.body, exchange.refused = answer
        except httpx.HTTPError as err:
            exchange.error = f"{type(err).__name__}: {err}"[:500]
        exchange.latency_ms = (time.perf_counter() - started) * 1000

    def _recorded_folder(self, task: StageTask, call: LlmCall) -> str | None:
        """The URI of the original's attempt folder whose calls answer this replay attempt, if a replay."""
        if call.recorded_from is None:
            return None
        if call.recorded_at is not None:  # the visit's committed attempt, whatever this attempt's number
            return f"{call.recorded_at}attempt={call.recorded_attempt or task.attempt}/"
        # A replay from before visits were recorded: its own version, stage folder and attempt.
        return self.store.uri(_attempt_folder(task, call.recorded_from))

    async def _recorded(self, exchange: _Exchange, folder: str, io: IO) -> None:
        uri = f"{folder}llm/{exchange.number}.json"
        try:
            record = (await io(self.store.read_json, uri))["response"]
        except ArtifactMissing:
            why = (
                "the stage is new or changed in the version replayed, or the original never made this attempt, "
                "so it never asked this"
                if exchange.number == 1
                else "the replay asked more than the original did"
            )
            raise InvalidInput(
                f"llm replay: the original has no recorded response {exchange.number} at {uri} "
                f"({why}); replay with --rerun-llm to call the model"
            ) from None
        exchange.status, exchange.body = record.get("status"), record.get("body", "")
        exchange.error, exchange.latency_ms, exchange.recorded = record.get("error"), 0.0, uri
        exchange.refused = record.get("refused")


def _request(
    call: LlmCall, model: str, messages: list[dict[str, Any]], json_answer: bool, streams: bool
) -> dict[str, Any]:
    """The chat-completions request of one call."""
    body: dict[str, Any] = {"model": model, "messages": list(messages), "temperature": call.temperature}
    if call.max_tokens is not None:
        body["max_tokens"] = call.max_tokens
    if call.tools:  # none offered this turn: no `tools`, and any call the answer makes is refused
        body["tools"] = call.tools  # the answer may call them instead of answering
    elif json_answer:
        body["response_format"] = {"type": "json_object"}
    if streams:  # the answer's tokens as they come, and its usage at the end
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def _spent(budgets: Sequence[SpendLimit], spend: Mapping[str, Any]) -> str | None:
    """Why one of ``budgets`` is spent once the stage's calls so far (``spend``) are added to it,
    as the run will count them when the visit commits; None while a repair is within them all."""
    for limit in budgets:
        usage = dict(limit.spent)
        add_spend(usage, spend)
        spent = limit.budget.spent(usage)
        if spent is not None:
            return spent
    return None


def _attempt_folder(task: StageTask, run_id: str) -> str:
    """The folder of ``run_id``'s attempt of this stage: its output and its calls (``llm/``)."""
    return stage_output_key(task.workflow_version, run_id, task.stage_path, task.attempt).removesuffix("output.json")
