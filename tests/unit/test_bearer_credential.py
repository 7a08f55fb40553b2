"""The key an `Authorization` header carries: HTTP's auth schemes are case-insensitive."""

from __future__ import annotations

import pytest

from dsmo.server.api_keys import bearer_credential


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("Bearer dsmo_k", "dsmo_k"),
        ("bearer dsmo_k", "dsmo_k"),
        ("BEARER   dsmo_k ", "dsmo_k"),
        ("dsmo_k", "dsmo_k"),  # no scheme: the header is the key, as before
        ("", ""),
        (None, ""),
    ],
)
def test_the_key_follows_a_bearer_scheme_in_any_case(header: str | None, key: str) -> None:
    assert bearer_credential(header) == key
