"""The OpenAI-compatible endpoint that `llm` nodes call, its models and their aliases, and the
MCP servers whose tools they may offer."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dsmo.config.env_values import EnvReader, SettingsError

MIN_RESPONSE_BYTES = 1024


@dataclass(frozen=True)
class LlmSettings:
    """The model endpoint, its key, the default model, model aliases and the response bound.

    Attributes:
        base_url: An OpenAI-compatible endpoint for LLM stages [``DSMO_LLM_BASE_URL``].
        model: The model LLM stages ask for [``DSMO_LLM_MODEL``].
        api_key: The endpoint's key [``DSMO_LLM_API_KEY``].
        models: Model aliases `llm` nodes may name, ``alias=model`` comma-separated
            (``fast=gpt-4o-mini,smart=gpt-4o``) [``DSMO_LLM_MODELS``].
        max_response_bytes: The most of one model response a worker reads, at least 1024;
            a longer answer is refused [``DSMO_LLM_MAX_RESPONSE_BYTES``].
        mcp_servers: MCP servers whose tools `llm` nodes may bind, comma-separated: ``name=url``
            (streamable HTTP: ``orders=https://mcp.example.com/mcp``) or ``name=stdio:COMMAND``
            (a process the worker starts per call: ``files=stdio:npx -y some-mcp-server``)
            [``DSMO_MCP_SERVERS``].
        mcp_headers: Headers each MCP server is called with, a JSON object by server name
            (``{"orders": {"Authorization": "Bearer ..."}}``): secrets stay in the worker's
            settings, never in a definition [``DSMO_MCP_HEADERS``].
        prices: What each model costs, a JSON object of USD per million tokens by model name
            (``{"gpt-4o-mini": {"input": 0.15, "output": 0.6}}``): a call to a model in it records
            its cost (``costUsd``), which budgets and spend reports sum [``DSMO_LLM_PRICES``].
    """

    # The variables this group reads, with their defaults.
    VARIABLES: ClassVar[dict[str, str]] = {
        "DSMO_LLM_BASE_URL": "",
        "DSMO_LLM_MODEL": "gpt-4o-mini",
        "DSMO_LLM_API_KEY": "",
        "DSMO_LLM_MODELS": "",
        # The most of one model response a worker reads (4 MiB); a longer answer is refused, recorded.
        "DSMO_LLM_MAX_RESPONSE_BYTES": "4194304",
        "DSMO_MCP_SERVERS": "",
        "DSMO_MCP_HEADERS": "",
        "DSMO_LLM_PRICES": "",
    }

    base_url: str = ""
    model: str = "gpt-4o-mini"
    api_key: str = ""
    models: str = ""
    max_response_bytes: int = 4 << 20
    mcp_servers: str = ""
    mcp_headers: str = ""
    prices: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LlmSettings:
        """Read and check this group's variables.

        Args:
            env: The environment; a variable unset or empty takes its default.

        Returns:
            The settings.

        Raises:
            SettingsError: A value is invalid: an alias that is not ``alias=model``, a bound
                below 1024.
        """
        read = EnvReader(env, cls.VARIABLES)
        settings = cls(
            base_url=read.text("DSMO_LLM_BASE_URL"),
            model=read.text("DSMO_LLM_MODEL"),
            api_key=read.text("DSMO_LLM_API_KEY"),
            models=read.text("DSMO_LLM_MODELS"),
            max_response_bytes=read.whole_number("DSMO_LLM_MAX_RESPONSE_BYTES"),
            mcp_servers=read.text("DSMO_MCP_SERVERS"),
            mcp_headers=read.text("DSMO_MCP_HEADERS"),
            prices=read.text("DSMO_LLM_PRICES"),
        )
        settings.aliases  # noqa: B018 - validates the aliases early
        settings.mcp  # noqa: B018 - and the MCP servers
        settings.price_table  # noqa: B018 - and the prices
        if settings.max_response_bytes < MIN_RESPONSE_BYTES:
            raise SettingsError(f"DSMO_LLM_MAX_RESPONSE_BYTES: {settings.max_response_bytes} is below 1024")
        return settings

    def to_env(self) -> dict[str, str]:
        """The variables that make another process read these settings.

        Returns:
            Variable names and values.
        """
        return {
            "DSMO_LLM_BASE_URL": self.base_url,
            "DSMO_LLM_MODEL": self.model,
            "DSMO_LLM_API_KEY": self.api_key,
            "DSMO_LLM_MODELS": self.models,
            "DSMO_LLM_MAX_RESPONSE_BYTES": str(self.max_response_bytes),
            "DSMO_MCP_SERVERS": self.mcp_servers,
            "DSMO_MCP_HEADERS": self.mcp_headers,
            "DSMO_LLM_PRICES": self.prices,
        }

    @property
    def aliases(self) -> dict[str, str]:
        """The model aliases of ``DSMO_LLM_MODELS``, alias to model.

        Raises:
            SettingsError: An entry is not ``alias=model``.
        """
        aliases: dict[str, str] = {}
        for entry in filter(None, (part.strip() for part in self.models.split(","))):
            alias, equals, model = (part.strip() for part in entry.partition("="))
            if not equals or not alias or not model:
                raise SettingsError(f"DSMO_LLM_MODELS: {entry!r} is not alias=model")
            aliases[alias] = model
        return aliases

    @property
    def price_table(self) -> dict[str, tuple[float, float]]:
        """``DSMO_LLM_PRICES`` by model: (input, output) USD per million tokens.

        Raises:
            SettingsError: Not a JSON object of ``{"input": n, "output": n}`` with numbers of 0 or more.
        """
        try:
            table = json.loads(self.prices) if self.prices.strip() else {}
        except ValueError:
            raise SettingsError("DSMO_LLM_PRICES: not JSON (an object of {input, output} prices by model)") from None
        if not isinstance(table, dict):
            raise SettingsError("DSMO_LLM_PRICES: not a JSON object ({input, output} prices by model)")
        prices: dict[str, tuple[float, float]] = {}
        for model, price in table.items():
            paid = [price.get(side) if isinstance(price, dict) else None for side in ("input", "output")]
            if not all(isinstance(n, int | float) and not isinstance(n, bool) and n >= 0 for n in paid):
                why = "give input and output, USD per million tokens (0 or more)"
                raise SettingsError(f"DSMO_LLM_PRICES.{model}: {why}")
            prices[model] = (float(paid[0]), float(paid[1]))  # type: ignore[arg-type]
        return prices

    @property
    def mcp(self) -> dict[str, tuple[str, dict[str, str]]]:
        """The MCP servers by name: their URL (or ``stdio:COMMAND``) and the headers they are called with.

        Raises:
            SettingsError: A server is not ``name=http(s)://...`` or ``name=stdio:COMMAND``, or the
                headers are not a JSON object of objects of strings naming known servers.
        """
        servers: dict[str, tuple[str, dict[str, str]]] = {}
        for entry in filter(None, (part.strip() for part in self.mcp_servers.split(","))):
            name, equals, url = (part.strip() for part in entry.partition("="))
            command = url.removeprefix("stdio:").strip() if url.startswith("stdio:") else None
            if (
                not equals
                or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name)
                or not (url.startswith(("http://", "https://")) or command)
            ):
                raise SettingsError(
                    f"DSMO_MCP_SERVERS: {entry!r} is not name=http(s)://... or name=stdio:COMMAND (a lowercase name)"
                )
            if name in servers:
                raise SettingsError(f"DSMO_MCP_SERVERS: {name!r} is named twice")
            servers[name] = (url, {})
        try:
            headers = json.loads(self.mcp_headers) if self.mcp_headers.strip() else {}
        except ValueError:
            raise SettingsError("DSMO_MCP_HEADERS: not JSON (an object of header objects by server name)") from None
        if not isinstance(headers, dict):
            raise SettingsError("DSMO_MCP_HEADERS: not a JSON object (header objects by server name)")
        for name, given in headers.items():
            if name not in servers:
                raise SettingsError(f"DSMO_MCP_HEADERS: {name!r} is not a server of DSMO_MCP_SERVERS")
            if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
                raise SettingsError(f"DSMO_MCP_HEADERS: {name}: not an object of header names to strings")
            servers[name] = (servers[name][0], dict(given))
        return servers
