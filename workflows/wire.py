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
