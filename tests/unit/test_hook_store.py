"""Webhook subscriptions: their fields are checked, their signature is the documented one, and a
worker refuses to POST to its own network unless told it may."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError

from dsmo.activities.hook_activities import check_public_address
from dsmo.activities.hook_store import HookError, checked, signature, valid_signature


@pytest.mark.parametrize(
    ("url", "events", "why"),
    [
        ("ftp://x", ["RUN_COMPLETED"], "url: 'ftp://x' is not an http(s) URL"),
        ("https://x.example", [], "events: none given"),
        ("https://x.example", ["RUN_DONE"], "events: RUN_DONE: give some of RUN_CREATED"),
    ],
)
def test_a_subscription_with_a_bad_field_is_refused_naming_it(url: str, events: list[str], why: str) -> None:
    with pytest.raises(HookError) as refused:
        checked(url, events, 12, 1.0)
    assert str(refused.value).startswith(why)


def test_the_signature_signs_the_time_and_the_body() -> None:
    header = signature("whsec_1", b'{"a":1}', timestamp=1_700_000_000)
    assert valid_signature("whsec_1", header, b'{"a":1}', now=1_700_000_100)
    assert not valid_signature("whsec_1", header, b'{"a":2}', now=1_700_000_100)  # another body
    assert not valid_signature("whsec_2", header, b'{"a":1}', now=1_700_000_100)  # another secret
    assert not valid_signature("whsec_1", header, b'{"a":1}', now=1_700_001_000)  # too old


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://10.0.0.7/"])
def test_a_worker_refuses_to_post_to_its_own_network(url: str) -> None:
    with pytest.raises(ApplicationError, match="an address of this network"):
        asyncio.run(check_public_address(url))
