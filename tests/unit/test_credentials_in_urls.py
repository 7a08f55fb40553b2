"""A DSMO key in a URL is recognised by the parameter's name, whatever its case or punctuation, or by
the key's own shape under any name; it is refused and never reaches the access log."""

from __future__ import annotations

import logging

import pytest

from dsmo.server.ingress.guard import RedactedAccessLog, credential_params, redact_credentials

# The shape `dsmo keys add` prints; fixed, so every test process collects the same test ids.
KEY = "dsmo_" + "Ab3-_x9Z" * 5 + "q7K"


@pytest.mark.parametrize(
    ("query", "named"),
    [
        (f"Authorization={KEY}", "Authorization"),
        (f"access-token={KEY}", "access-token"),
        (f"bearer={KEY}", "bearer"),
        ("API_KEY=anything", "API_KEY"),
        ("apiKey=anything", "apiKey"),
        ("X-Api-Key=anything", "X-Api-Key"),
        (f"q=Bearer%20{KEY}", "q"),  # any name: the value is a key
        (f"status=waiting&note={KEY}", "note"),
        (KEY, "[redacted]"),  # the bare key as a parameter: its name is never echoed
    ],
)
def test_a_credential_in_the_query_is_found_and_redacted(query: str, named: str) -> None:
    assert credential_params(query) == [named]
    redacted = redact_credentials(f"/executions?{query}")
    assert KEY not in redacted and "anything" not in redacted and "[redacted]" in redacted


@pytest.mark.parametrize(
    "query",
    ["status=waiting&agent=support", "after=dsmo_report_final", f"agent=x{KEY}", "keyword=dsmo", "monkey=1"],
)
def test_ordinary_parameters_are_not_credentials(query: str) -> None:
    assert credential_params(query) == []
    assert redact_credentials(f"/executions?{query}") == f"/executions?{query}"


def test_an_exempt_name_is_still_refused_when_it_carries_a_key() -> None:
    # The object store's `key` (the uploaded object) on the console's return address.
    exempt = frozenset({"key"})
    assert credential_params("key=uploads/r1/e1/scan.pdf&bucket=b", exempt=exempt) == []
    assert credential_params(f"key={KEY}", exempt=exempt) == ["key"]


def test_the_access_log_line_carries_no_key() -> None:
    args = ("127.0.0.1:5000", "GET", f"/executions?status=waiting&Authorization=Bearer%20{KEY}", "1.1", 400)
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)
    RedactedAccessLog().filter(record)
    assert KEY not in record.getMessage()
    assert "/executions?status=waiting&Authorization=[redacted]" in record.getMessage()
