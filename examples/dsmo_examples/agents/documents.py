"""Deterministic document processors for the paper's pipelines: extract, classify, enrich, validate.

Each is a pure function of its input document (no clock, no randomness, no network), so the same
input always gives the same output: replaying a run reproduces its artifacts byte for byte.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dsmo.activities.plugin_errors import InvalidInput
from dsmo.activities.plugins import agent
from dsmo.activities.processors import ProcessorOutput
from dsmo.workflows.contracts.activity_io import StageMessage

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_AMOUNT = re.compile(
    r"(?:(?P<cur1>EUR|USD|GBP|€|\$|£)\s?(?P<v1>\d+(?:[.,]\d{1,2})?))|(?:(?P<v2>\d+(?:[.,]\d{1,2})?)\s?(?P<cur2>EUR|USD|GBP|€|\$|£))"
)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_CURRENCY = {"€": "EUR", "$": "USD", "£": "GBP"}
RULES: dict[str, tuple[str, ...]] = {
    "invoice": ("invoice", "factura", "total", "amount due", "vat", "iva", "payment"),
    "complaint": ("complaint", "queja", "refund", "broken", "unhappy", "reclamación", "damaged"),
    "application": ("curriculum", "resume", "cv", "application", "candidatura", "experience"),
}


class _Documented(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Text(_Documented):
    text: str


class TextInput(_Documented):
    """The run's input: ``{"document": {"text": ...}}``, or ``{"text": ...}`` directly."""

    document: _Text | None = None
    text: str | None = None


class Amount(_Documented):
    value: float
    currency: str = Field(description="EUR, USD, GBP, or empty when none was written")


class Extracted(_Documented):
    """text-extract's output document: rule-classify's and record-validate's input."""

    text: str
    lines: list[str] = Field(default_factory=list)
    wordCount: int = 0
    emails: list[str] = Field(default_factory=list)
    amounts: list[Amount] = Field(default_factory=list)
    dates: list[str] = Field(default_factory=list)


class ExtractSummary(_Documented):
    wordCount: int = Field(ge=0)
    hasAmount: bool = Field(description="an amount with a currency was found")
    emailCount: int = Field(ge=0, description="distinct e-mail addresses")


class Classified(_Documented):
    """rule-classify's output document (text-extract's plus the category): invoice-enrich's input."""

    lines: list[str]
    amounts: list[Amount] = Field(default_factory=list)
    emails: list[str] = Field(default_factory=list)
    dates: list[str] = Field(default_factory=list)
    category: str | None = None


class ClassifySummary(_Documented):
    category: Literal["invoice", "complaint", "application", "other"]
    confidence: float = Field(ge=0, le=1, description="matched keywords / 3, at most 1")


class EnrichSummary(_Documented):
    total: float = Field(description="the largest amount found, 0 if none")
    currency: str
    status: Literal["ok", "needs_review"] = Field(description="needs_review when no amount was found")


class ValidateInput(_Documented):
    text: str | None = None
    emails: list[str] = Field(default_factory=list)
    wordCount: int = 0


class ValidateSummary(_Documented):
    valid: bool
    problemCount: int = Field(ge=0, description="empty text, no contact e-mail, fewer than 5 words")


def _text_of(document: Any) -> str:
    if isinstance(document, dict):
        inner = document.get("document", document)
        text = inner.get("text") if isinstance(inner, dict) else None
        if isinstance(text, str):
            return text
    raise InvalidInput("input: expected an object with document.text (or text)")


@agent("text-extract", version="1.0.0", input_schema=TextInput, summary_schema=ExtractSummary)
def text_extract(document: Any, message: StageMessage) -> ProcessorOutput:
    """Lines, words, e-mail addresses, amounts with currency and ISO dates of a text."""
    text = _text_of(document)
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    words = " ".join(lines).split()
    amounts = []
    for match in _AMOUNT.finditer(text):
        raw = (match.group("v1") or match.group("v2") or "0").replace(",", ".")
        symbol = match.group("cur1") or match.group("cur2") or ""
        amounts.append({"value": float(raw), "currency": _CURRENCY.get(symbol, symbol)})
    emails = sorted(set(_EMAIL.findall(text)))
    output = {
        "text": "\n".join(lines),
        "lines": lines,
        "wordCount": len(words),
        "emails": emails,
        "amounts": amounts,
        "dates": sorted(set(_DATE.findall(text))),
    }
    summary = {"wordCount": len(words), "hasAmount": bool(amounts), "emailCount": len(emails)}
    return ProcessorOutput(document=output, summary=summary)


@agent("rule-classify", version="1.0.0", input_schema=Extracted, summary_schema=ClassifySummary)
def rule_classify(document: Any, message: StageMessage) -> ProcessorOutput:
    """Invoice, complaint, application or other, by keywords (an amount counts for invoice)."""
    if not isinstance(document, dict) or "text" not in document:
        raise InvalidInput("input: expected the output of text-extract (an object with text)")
    lowered = str(document["text"]).lower()
    scores = {category: [word for word in words if word in lowered] for category, words in RULES.items()}
    if document.get("amounts"):
        scores["invoice"].append("<amount>")
    category, matched = max(scores.items(), key=lambda item: (len(item[1]), item[0] == "invoice"))
    if not matched:
        category = "other"
    confidence = round(min(1.0, len(matched) / 3), 2)
    output = {**document, "category": category, "confidence": confidence, "matched": matched}
    return ProcessorOutput(document=output, summary={"category": category, "confidence": confidence})


@agent("invoice-enrich", version="1.0.0", input_schema=Classified, summary_schema=EnrichSummary)
def invoice_enrich(document: Any, message: StageMessage) -> ProcessorOutput:
    """Vendor (from the first e-mail's domain), total, currency and a review status of a classified text."""
    if not isinstance(document, dict) or "lines" not in document:
        raise InvalidInput("input: expected a classified document (an object with lines)")
    amounts = document.get("amounts") or []
    total = max((amount["value"] for amount in amounts), default=0.0)
    currency = next((a["currency"] for a in amounts if a["value"] == total and a["currency"]), "EUR")
    emails = document.get("emails") or []
    vendor = emails[0].split("@", 1)[1] if emails else (document["lines"][0] if document["lines"] else "unknown")
    status = "ok" if amounts else "needs_review"
    output = {
        "vendor": vendor,
        "total": total,
        "currency": currency,
        "status": status,
        "dates": document.get("dates", []),
        "category": document.get("category"),
    }
    return ProcessorOutput(document=output, summary={"total": total, "currency": currency, "status": status})


@agent("record-validate", version="1.0.0", input_schema=ValidateInput, summary_schema=ValidateSummary)
def record_validate(document: Any, message: StageMessage) -> ProcessorOutput:
    """Checks an extracted text: not empty, has a contact e-mail, at least 5 words."""
    if not isinstance(document, dict):
        raise InvalidInput("input: expected an object")
    problems = []
    if not document.get("text"):
        problems.append("empty text")
    if not document.get("emails"):
        problems.append("no contact e-mail")
    if int(document.get("wordCount", 0)) < 5:
        problems.append("fewer than 5 words")
    output = {"valid": not problems, "problems": problems, "category": document.get("category", "other")}
    return ProcessorOutput(document=output, summary={"valid": not problems, "problemCount": len(problems)})
