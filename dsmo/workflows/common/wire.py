"""Base model for everything that crosses the wire: camelCase JSON, snake_case Python."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


def to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class WireModel(BaseModel):
    """JSON people and other clients see follows the seeds' camelCase names."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
    )


class CamelModel(BaseModel):
    """What a definition holds: camelCase keys, unknown keys refused, frozen once parsed."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, frozen=True, alias_generator=to_camel, serialize_by_alias=True
    )
