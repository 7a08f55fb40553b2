"""Output schemas a `run_agent` node may declare (`outputSchema: Name`), checked by the stage activity."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dsmo.activities.plugin_errors import ContractViolation


class _Schema(BaseModel):
    model_config = ConfigDict(extra="allow")


class ProfileSummary(_Schema):
    name: str = Field(min_length=1)
    firstName: str = Field(min_length=1)
    phone: str | None = None


class Classification(_Schema):
    category: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0)


class ExtractedText(_Schema):
    text: str
    wordCount: int = Field(ge=0)


class InvoiceFields(_Schema):
    vendor: str = Field(min_length=1)
    total: float = Field(ge=0)
    currency: str = Field(min_length=3, max_length=3)
    status: Literal["ok", "needs_review"] = "ok"


SCHEMAS: dict[str, type[BaseModel]] = {
    "ProfileSummary": ProfileSummary,
    "Classification": Classification,
    "ExtractedText": ExtractedText,
    "InvoiceFields": InvoiceFields,
}


def check_output(schema: str | None, document: Any, *, agent: str) -> None:
    """Raise ContractViolation if ``document`` does not match the declared schema."""
    if schema is None:
        return
    model = SCHEMAS.get(schema)
    if model is None:
        raise ContractViolation(
            f"agent {agent}: output schema {schema!r} is not registered ({', '.join(sorted(SCHEMAS))})"
        )
    try:
        model.model_validate(document)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "output"
        raise ContractViolation(f"agent {agent}: output does not match {schema}: {field}: {first['msg']}") from None
