"""Webhook subscriptions: their fields are checked, their signature is the documented one, and a
worker refuses to POST to anything but the internet unless told it may, connecting to the very
address it checked."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.hook_activities import HookActivities, check_public_address, is_public
from dsmo.activities.hook_store import HookError, Subscription, checked, signature, valid_signature
from dsmo.workflows.contracts.hook_io import HookDelivery


@pytest.mark.parametrize(
    ("url", "events", "why"),
    [
        ("ftp://x", ["RUN_COMPLETED"], "url: 'ftp://x' is not an http(s) URL"),
        ("https://x.example", [], "events: none given"),
        ("https://x.example", ["RUN_DONE"], "events: RUN_DONE: give some of RUN_CREATED"),
        ("http://[::1", ["RUN_COMPLETED"], "url: 'http://[::1' is not a valid URL (Invalid IPv6 URL)"),
        ("http://example.com:99999/x", ["RUN_COMPLETED"], "url: 'http://example.com:99999/x' is not a valid URL"),
        ("http://example.com:0/x", ["RUN_COMPLETED"], "url: 'http://example.com:0/x' has no usable port"),
        ("http:// /x", ["RUN_COMPLETED"], "url: 'http:// /x' has no valid host"),
        ("http://-bad-.example/x", ["RUN_COMPLETED"], "url: 'http://-bad-.example/x' has no valid host"),
        ("http://:80/x", ["RUN_COMPLETED"], "url: 'http://:80/x' has no valid host"),
        (
            "http://user:pa55word@example.com/x",
            ["RUN_COMPLETED"],
            "url: 'http://[redacted]@example.com/x' carries a user name or password",
        ),
    ],
)
def test_a_subscription_with_a_bad_field_is_refused_naming_it(url: str, events: list[str], why: str) -> None:
    with pytest.raises(HookError) as refused:
        checked(url, events, 12, 1.0)
    assert str(refused.value).startswith(why)
    assert "pa55word" not in str(refused.value)


@pytest.mark.parametrize("agent", ["Bad Agent!", "support_team", "-support", "a" * 64])
def test_a_subscription_to_no_possible_agent_is_refused(agent: str) -> None:
    with pytest.raises(HookError, match=r"^agent: .* is not an agent name"):
        checked("https://x.example/hook", ["RUN_COMPLETED"], 12, 1.0, agent)


@pytest.mark.parametrize(
    "url", ["https://crm.example.com/dsmo", "http://[2001:db8::1]:8080/x", "https://bücher.example/x", "http://h:1/"]
)
def test_a_usable_url_is_taken(url: str) -> None:
    assert checked(url, ["run_completed"], 12, 1.0, "support") == ("RUN_COMPLETED",)


def test_a_listed_subscription_never_shows_a_password_its_url_carries() -> None:
    # One made before such URLs were refused.
    made = Subscription("hook-1", "https://u:pa55word@example.com/x", ("RUN_CREATED",), None, "whsec_1", "now")
    assert made.shown()["url"] == "https://[redacted]@example.com/x" and "secret" not in made.shown()


def test_the_signature_signs_the_time_and_the_body() -> None:
    header = signature("whsec_1", b'{"a":1}', timestamp=1_700_000_000)
    assert valid_signature("whsec_1", header, b'{"a":1}', now=1_700_000_100)
    assert not valid_signature("whsec_1", header, b'{"a":2}', now=1_700_000_100)  # another body
    assert not valid_signature("whsec_2", header, b'{"a":1}', now=1_700_000_100)  # another secret
    assert not valid_signature("whsec_1", header, b'{"a":1}', now=1_700_001_000)  # too old


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/latest",
        "http://10.0.0.7/",
        "http://100.100.100.200/latest/meta-data",  # Alibaba Cloud's metadata, in shared (CGNAT) space
        "http://100.64.0.1/",
        "http://192.0.2.1/",  # documentation
        "http://198.18.0.1/",  # benchmarking
        "http://0.0.0.0/",
        "http://224.0.0.1/",  # multicast
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
        "http://[::ffff:100.100.100.200]/",
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "http://[fd00::1]/",
    ],
)
def test_a_worker_refuses_to_post_to_anything_but_the_internet(url: str) -> None:
    with pytest.raises(ApplicationError, match="not an internet address"):
        asyncio.run(check_public_address(url))


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"])
def test_an_internet_address_is_public_however_it_is_written(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@dataclass
class Receiver:
    posts: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def receivers_on_one_port() -> Iterator[tuple[Receiver, Receiver, int]]:
    """Two receivers on one port: on 127.0.0.2 (standing for a public host) and on 127.0.0.1."""
    public, internal = Receiver(), Receiver()

    def handler(state: Receiver) -> type[BaseHTTPRequestHandler]:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                state.posts.append({"path": self.path, "host": self.headers["Host"]})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    outside = ThreadingHTTPServer(("127.0.0.2", 0), handler(public))
    port = outside.server_address[1]
    inside = ThreadingHTTPServer(("127.0.0.1", port), handler(internal))
    for server in (outside, inside):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield public, internal, port
    finally:
        outside.shutdown()
        inside.shutdown()


def test_a_name_that_moves_to_loopback_after_the_check_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: the resolver answers a public address to the check, then loopback; the POST
    goes to the address checked, named by its host."""
    public_address = "93.184.216.34"
    answers = iter([public_address] + ["127.0.0.1"] * 10)
    resolve = socket.getaddrinfo
    connect = anyio.connect_tcp

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("rebind.test", b"rebind.test"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return resolve(host, port, *args, **kwargs)

    async def routed(remote_host: Any, remote_port: int, **kwargs: Any) -> Any:
        # The internet, simulated: the public address's server is the receiver on 127.0.0.2.
        host = "127.0.0.2" if str(remote_host) == public_address else remote_host
        return await connect(host, remote_port, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(anyio, "connect_tcp", routed)
    with receivers_on_one_port() as (public, internal, port):
        url = f"http://rebind.test:{port}/hook"
        activities = HookActivities(ArtifactStore(None, "bucket"), None, "hooks")  # type: ignore[arg-type]
        subscription = Subscription("hook-1", url, ("RUN_CREATED",), None, "whsec_1", "now")
        monkeypatch.setattr(activities.hooks, "get", lambda subscription_id: subscription)
        delivery = HookDelivery(
            delivery_id="hook-1.d1",
            subscription="hook-1",
            event="RUN_CREATED",
            run_id="r1",
            agent="greeter",
            status="running",
            at=datetime.now(UTC),
        )
        asyncio.run(ActivityEnvironment().run(activities.post_hook, delivery))
    assert internal.posts == []
    assert public.posts == [{"path": "/hook", "host": f"rebind.test:{port}"}]
