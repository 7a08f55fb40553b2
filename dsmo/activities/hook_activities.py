"""The webhook activities: find what changed (`scan_hooks`), POST one event (`post_hook`), and set
aside a delivery past its budget (`record_failed_hook`).

`scan_hooks` looks, every `SCAN_EVERY` seconds for about a minute, at what visibility shows:
runs started, waiting or ended since its last look (a little before it, so a row visibility wrote
late is not missed). For each subscription that wants the event it starts a delivery workflow
whose id names the subscription, the run and the event: an event seen again starts nothing.
Replays and what-ifs (their memo says ``replay``) are never delivered: a replay acts on nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import socket
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from temporalio import activity
from temporalio.client import Client, WorkflowExecution
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from dsmo.activities.artifacts import ArtifactStore
from dsmo.activities.hook_store import HookStore, Subscription, body_of, shown_url, signature
from dsmo.workflows.common import search_attributes as sa
from dsmo.workflows.contracts.hook_io import (
    DELIVERY_WORKFLOW,
    POST_HOOK,
    RECORD_FAILED_HOOK,
    SCAN_HOOKS,
    HookDelivery,
    HookScan,
)

SCAN_EVERY = 1.0  # seconds between two looks at visibility
ROUND_SECONDS = 55.0  # one activity's looks, then the workflow starts the next round
OVERLAP_SECONDS = 10.0
OVERLAP = timedelta(seconds=OVERLAP_SECONDS)  # how far back each look reaches again (visibility's late rows)
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are an IPv4 address


def delivery_workflow_id(delivery_id: str) -> str:
    return f"dsmo-hook-{delivery_id}"


class HookActivities:
    """What the webhook workflows do outside Temporal: visibility, the store and the HTTP POSTs."""

    def __init__(self, store: ArtifactStore, client: Client, task_queue: str, allow_private: bool = False) -> None:
        self.hooks = HookStore(store)
        self.allow_private = allow_private
        self.client = client
        self.task_queue = task_queue
        self.recent: dict[str, float] = {}  # delivery ids this worker started lately, and when

    def activities(self) -> list[Callable[..., Any]]:
        """The activities a worker serves for webhooks."""
        return [self.scan_hooks, self.post_hook, self.record_failed_hook]

    @activity.defn(name=SCAN_HOOKS)
    async def scan_hooks(self, scan: HookScan) -> HookScan:
        """One dispatcher round (about a minute of looks): the deliveries it started, and where it got to."""
        details = activity.info().heartbeat_details
        since = datetime.fromisoformat(details[0]) if details else (scan.since or datetime.now(UTC))
        ends, started = time.monotonic() + ROUND_SECONDS, 0
        while time.monotonic() < ends:
            subscriptions = await asyncio.to_thread(self.hooks.subscriptions)
            looked_at = datetime.now(UTC)
            if subscriptions:
                started += await self._dispatch(subscriptions, since - OVERLAP)
            since = max(since, looked_at)
            activity.heartbeat(since.isoformat())
            await asyncio.sleep(SCAN_EVERY)
        return HookScan(since=since, started=started)

    async def _dispatch(self, subscriptions: list[Subscription], since: datetime) -> int:
        at = since.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        changed = f"StartTime >= '{at}' OR CloseTime >= '{at}' OR WaitingSince >= '{at}'"
        query = f"WorkflowType = 'AgentExecution' AND ({changed})"
        started = 0
        async for execution in self.client.list_workflows(query):
            agent = execution.typed_search_attributes.get(sa.AGENT_NAME) or ""
            wanted = [
                (subscription, found)
                for found in _events(execution, since)
                for subscription in subscriptions
                if subscription.matches(found[0], agent)
            ]
            if not wanted or (await execution.memo()).get("replay"):
                continue  # nobody wants it, or a replay or a what-if: nothing it does reaches anyone
            for subscription, (event, when, key, status) in wanted:
                started += await self._start(subscription, execution, event, when, key, status, agent)
        return started

    async def _start(
        self,
        subscription: Subscription,
        execution: WorkflowExecution,
        event: str,
        when: datetime,
        key: str,
        status: str,
        agent: str,
    ) -> int:
        digest = hashlib.sha256(f"{execution.id}\x1f{key}".encode()).hexdigest()[:20]
        delivery_id = f"{subscription.id}.{digest}"
        now = time.monotonic()
        if self.recent.get(delivery_id, -OVERLAP_SECONDS * 3) > now - OVERLAP_SECONDS * 3:
            return 0  # started by a look a moment ago: each look reaches back over the last ones
        self.recent = {seen: at for seen, at in self.recent.items() if at > now - OVERLAP_SECONDS * 3}
        delivery = HookDelivery(
            delivery_id=delivery_id,
            subscription=subscription.id,
            event=event,
            run_id=execution.id,
            agent=agent,
            status=status,
            waiting_for=execution.typed_search_attributes.get(sa.WAITING_FOR) if event == "RUN_WAITING" else None,
            at=when,
            max_attempts=subscription.max_attempts,
            first_retry_seconds=subscription.first_retry_seconds,
        )
        try:
            await self.client.start_workflow(
                DELIVERY_WORKFLOW,
                delivery,
                id=delivery_workflow_id(delivery.delivery_id),
                task_queue=self.task_queue,
                # The id names the event for good: seen again (the next look, a retried round), it starts nothing.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            self.recent[delivery_id] = now
            return 0
        self.recent[delivery_id] = now  # only once started: a failed start is tried again
        return 1

    @activity.defn(name=POST_HOOK)
    async def post_hook(self, delivery: HookDelivery) -> None:
        """POST the event, signed; an answer other than 2xx (or none) is retried by the workflow."""
        subscription = await asyncio.to_thread(self.hooks.get, delivery.subscription)
        if subscription is None:
            raise ApplicationError(f"subscription {delivery.subscription} was removed", type="SubscriptionGone")
        body = body_of(delivery.model_dump(mode="json", by_alias=True, exclude={"max_attempts", "first_retry_seconds"}))
        headers = {
            "Content-Type": "application/json",
            "DSMO-Delivery": delivery.delivery_id,
            "DSMO-Event": delivery.event,
            "DSMO-Attempt": str(activity.info().attempt),
            "DSMO-Signature": signature(subscription.secret, body),
            "User-Agent": "dsmo-webhooks/1",
        }
        url = shown_url(subscription.url)  # what errors name: never a password the URL carries
        try:
            if self.allow_private:
                async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as http:
                    answer = await http.post(subscription.url, content=body, headers=headers)
            else:
                addresses = await check_public_address(subscription.url)
                answer = await post_pinned(subscription.url, addresses, body, headers)
        except (httpx.HTTPError, httpx.InvalidURL) as err:
            raise ApplicationError(f"{url}: {type(err).__name__}: {err}"[:500]) from None
        if not answer.is_success:
            raise ApplicationError(f"{url} answered {answer.status_code}")

    @activity.defn(name=RECORD_FAILED_HOOK)
    async def record_failed_hook(self, delivery: HookDelivery, reason: str) -> None:
        """Set a delivery past its budget aside, listed by `dsmo hooks failed`."""
        record = delivery.model_dump(mode="json", by_alias=True)
        await asyncio.to_thread(self.hooks.record_failed, record, reason)


def _events(execution: WorkflowExecution, since: datetime) -> list[tuple[str, datetime, str, str]]:
    """What happened to the run since ``since``: (event, when, its key in the run, the status)."""
    attrs: Any = execution.typed_search_attributes
    status = attrs.get(sa.AGENT_EXECUTION_STATUS) or "pending"
    found = []
    first = getattr(execution.raw_info, "first_run_id", "") in ("", execution.run_id)
    if first and execution.start_time >= since:  # the run's start, not a later generation's
        found.append(("RUN_CREATED", execution.start_time, "created", status))
    waiting_since = attrs.get(sa.WAITING_SINCE)
    if status == "waiting" and waiting_since is not None and waiting_since >= since:
        # Named by what and until when: the same wait carried into the run's next generation
        # (which begins it again, later) is the same event.
        until = attrs.get(sa.WAITING_UNTIL)
        kind = attrs.get(sa.WAITING_FOR)
        key = f"waiting:{kind}:{until.isoformat() if until else waiting_since.isoformat()}"
        found.append(("RUN_WAITING", waiting_since, key, status))
    ended = (
        execution.close_time is not None
        and execution.status is not None
        and execution.status.name != "CONTINUED_AS_NEW"
    )
    if ended and execution.close_time is not None and execution.close_time >= since:
        shown = status if status in ("completed", "failed", "timeout", "cancelled") else "terminated"
        found.append(("RUN_COMPLETED" if shown == "completed" else "RUN_ABORTED", execution.close_time, "ended", shown))
    return found


async def check_public_address(url: str) -> list[str]:
    """Refuse a URL whose host is not on the internet (loopback, private, shared such as a carrier's
    NAT or a cloud's metadata address, link-local, reserved): a subscription must not make workers
    reach what only they can reach.

    Returns:
        Every address the host resolved to, all checked, in the resolver's order. Connect to one of
        these (`post_pinned`), never to a fresh resolution: a name can move in between.

    Raises:
        ApplicationError: It is (retried: a name may resolve elsewhere later), or does not resolve.
    """
    parsed = httpx.URL(url)
    host, port = parsed.raw_host.decode("ascii"), parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        raise ApplicationError(f"{shown_url(url)}: {host} does not resolve ({err})") from None
    addresses = list(dict.fromkeys(str(address[0]) for *_, address in found))
    if not addresses:
        raise ApplicationError(f"{shown_url(url)}: {host} does not resolve")
    for address in addresses:
        if not is_public(ipaddress.ip_address(address)):
            raise ApplicationError(
                f"{shown_url(url)}: {host} is {address}, not an internet address (DSMO_HOOKS_ALLOW_PRIVATE)"
            )
    return addresses


def is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``ip`` is a globally routable unicast address, judged by the IPv4 address it carries if any.

    An IPv6 address that stands for an IPv4 one (mapped, NAT64, 6to4) reaches that one: 6to4's
    ``2002:7f00:1::`` is loopback, and ``::ffff:8.8.8.8`` is on the internet.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            return is_public(ip.sixtofour)
        if ip in NAT64:
            return is_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return ip.is_global and not ip.is_multicast


async def post_pinned(url: str, addresses: Sequence[str], content: bytes, headers: dict[str, str]) -> httpx.Response:
    """POST to ``url``, connecting only to ``addresses`` (those checked, at least one), each in turn until one connects.

    Only the address connected to is pinned: the URL's host stays the request's ``Host`` and, for
    https, the name TLS announces (SNI) and verifies the certificate against. The transport is
    given, so no proxy from the environment is used: a proxy would resolve the name itself.

    Raises:
        httpx.HTTPError: No address took the connection (the last one's error), or the POST failed.
    """
    target = httpx.URL(url)
    pinned = {**headers, "Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": target.raw_host.decode("ascii")} if target.scheme == "https" else {}
    transport = httpx.AsyncHTTPTransport()
    async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT, follow_redirects=False) as http:
        for address in addresses[:-1]:
            try:
                return await http.post(
                    target.copy_with(host=address), content=content, headers=pinned, extensions=extensions
                )
            except httpx.ConnectError:
                continue  # this address takes no connections: the next checked one may
        return await http.post(
            target.copy_with(host=addresses[-1]), content=content, headers=pinned, extensions=extensions
        )
