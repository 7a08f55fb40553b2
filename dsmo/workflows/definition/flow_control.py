"""Flow control in a definition: per-key concurrency, what a start for a busy key does, and debounce.

Each block names a key: a template over the run's input (``{{conversation.id}}``), rendered
when the run starts, so a key can only read what a start carries. These models and
`check_flow_control` are what a definition is admitted with; `run/flow_slots.py` and the
client carry them out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pydantic import Field

from dsmo.workflows.common.durations import Duration
from dsmo.workflows.common.errors import TemplateError
from dsmo.workflows.common.templating import placeholders, render
from dsmo.workflows.common.wire import CamelModel

SCOPE_PATTERN = r"^(agent|group:[a-z0-9][a-z0-9-]{0,62})$"
# Roots a key may read: the run's input only (stages, waits and config do not exist at start).
NOT_AT_START = frozenset({"stages", "steps", "run", "config", "lastResponse", "documentUrls"})
MAX_KEY_CHARS = 500  # a rendered key longer than this is refused (it names a conversation, a customer...)
# The workflows a scope's key values are spread over (`engine/key_locks.py`). Fixed: a value must
# always land in the same shard, whichever client or worker computes it.
KEY_SHARDS = 64
# Keys of at most this many slots: a run nobody waits for leaves its slot without a word, and the
# key's lock finds out that it ended when the slot is needed (`engine/key_locks.py`). A line of
# a key with more slots would carry many ended holders until its lock's next check.
QUIET_LIMIT = 10


class ConcurrencyKey(CamelModel):
    """At most ``limit`` runs per value of ``key`` are past PENDING; the others wait their turn.

    Attributes:
        key: A template over the run's input, e.g. ``{{conversation.id}}``.
        limit: How many runs with the same key value may be past PENDING at once (1 to 10,000).
        scope: ``agent`` (this agent's runs) or ``group:<name>`` (the runs of every agent that
            names the group share the key's slots).
        hold_while_waiting: A waiting run keeps its slot (the default: one conversation, one run);
            False gives it back while the run waits, and the run queues again to resume.
        on_busy: What a start for a key with no free slot does: ``queue`` (wait in line, the
            default), ``reject`` (the start is refused, naming the active run) or
            ``cancel-previous`` (the runs holding the key and those in line are cancelled, their
            sagas undone, and this one waits first in line)
            or ``deliver`` (the start's events go to the active run instead, as a reply would:
            a second message for a busy conversation).
    """

    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    limit: int = Field(default=1, ge=1, le=10_000)
    scope: str = Field(default="agent", pattern=SCOPE_PATTERN)
    hold_while_waiting: bool = True
    on_busy: Literal["queue", "reject", "cancel-previous", "deliver"] = "queue"


class Throttle(CamelModel):
    """At most ``limit`` per ``period`` for each value of ``key`` (starts of a definition, or stage
    starts of a node), with bursts of up to ``burst``; the rest wait their turn, none fails.

    Attributes:
        key: A template (a definition's over the run's input; a node's over the run's variables);
            None: one bucket for all (the agent's starts, or the node's stages).
        limit: How many per period (1 to 1,000,000).
        period: The period (1s to 1d).
        burst: How many may go at once after a quiet time (default: 1, evenly spaced).
    """

    key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_CHARS)
    limit: int = Field(ge=1, le=1_000_000)
    period: Duration
    burst: int = Field(default=1, ge=1, le=1_000_000)


class Debounce(CamelModel):
    """Starts for one key value within ``period`` of each other become one run, started once they stop.

    Attributes:
        key: A template over the run's input, e.g. ``{{order.id}}``.
        period: How long a key value must go without a start before its run starts (1s to 1h).
        mode: ``last`` starts the run with the last start's input; ``all`` with every start's
            input, in order, as the list ``inputs`` (at most `DEBOUNCE_MAX_INPUTS`).
    """

    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    period: Duration
    mode: Literal["last", "all"] = "last"


# A batch of `mode: all` starts that reaches this many inputs starts its run at once.
DEBOUNCE_MAX_INPUTS = 100


class FlowControlError(ValueError):
    """A flow-control block a definition cannot be admitted with ('@field: reason')."""


def check_flow_control(
    concurrency: Sequence[ConcurrencyKey] | None,
    inputs: Sequence[str],
    debounce: Debounce | None = None,
    throttle: Throttle | None = None,
) -> None:
    """Refuse, naming the field, blocks whose keys read what a start does not carry, or that contradict.

    Raises:
        FlowControlError: The first problem, as ``@concurrency.0.key: reason``.
    """
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(concurrency or ()):
        check_start_template(f"concurrency.{index}.key", entry.key, inputs)
        if (entry.scope, entry.key) in seen:
            raise FlowControlError(f"@concurrency.{index}: key {entry.key!r} in scope {entry.scope} is given twice")
        seen.add((entry.scope, entry.key))
    if throttle is not None:
        if throttle.key is not None:
            check_start_template("throttle.key", throttle.key, inputs)
        check_throttle_period("throttle", throttle)
    if debounce is not None:
        check_start_template("debounce.key", debounce.key, inputs)
        if not timedelta(seconds=1) <= debounce.period <= timedelta(hours=1):
            raise FlowControlError("@debounce.period: must be between 1s and 1h")
    keys = list(concurrency or ())
    mixed = [index for index, entry in enumerate(keys) if entry.hold_while_waiting != keys[0].hold_while_waiting]
    if mixed:
        # A run taking back a slot it gave up to wait, while holding one it kept, would take its
        # slots out of order: two runs could each wait for the other's.
        raise FlowControlError(
            f"@concurrency.{mixed[0]}.holdWhileWaiting: the keys of one definition all hold while "
            "waiting or all give their slots back"
        )
    policies = [index for index, entry in enumerate(concurrency or ()) if entry.on_busy != "queue"]
    if len(policies) > 1:
        raise FlowControlError(f"@concurrency.{policies[1]}.onBusy: only one key may say what a busy start does")


def check_throttle_period(field: str, throttle: Throttle) -> None:
    """Refuse a throttle's period outside 1s to 1d, naming ``field``.

    Raises:
        FlowControlError: ``@{field}.period: ...``.
    """
    if not timedelta(seconds=1) <= throttle.period <= timedelta(days=1):
        raise FlowControlError(f"@{field}.period: must be between 1s and 1d")


def throttle_id(owner: str, key: str) -> str:
    """The id of one throttle key value's bucket."""
    return f"dsmo-throttle.{owner}.{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def check_start_template(field: str, template: str, inputs: Sequence[str]) -> None:
    """Refuse a template (a key, a subject) that reads anything but the run's input, naming ``field``.

    Raises:
        FlowControlError: ``@{field}: reason``.
    """
    try:
        paths = placeholders(template)
    except TemplateError as err:
        raise FlowControlError(f"@{field}: {err}") from None
    if not paths:
        raise FlowControlError(f"@{field}: {template!r} names no input variable (e.g. {{{{conversation.id}}}})")
    for path in paths:
        root = re.split(r"[.\[]", path, maxsplit=1)[0]
        if root in NOT_AT_START:
            raise FlowControlError(f"@{field}: {{{{{path}}}}} is not known when a run starts; a key reads its input")
        if inputs and root not in inputs:
            raise FlowControlError(f"@{field}: {root!r} is not an input (inputs: {', '.join(inputs)})")


def render_key(field: str, template: str, variables: Mapping[str, Any]) -> str:
    """The key's value for a run with these input ``variables``.

    Raises:
        FlowControlError: The input lacks a value the key reads, or the value is empty or too long.
    """
    try:
        value = render(template, variables)
    except TemplateError as err:
        raise FlowControlError(f"{field}: {err}") from None
    if not value.strip():
        raise FlowControlError(f"{field}: {template!r} renders empty for this input")
    if len(value) > MAX_KEY_CHARS:
        raise FlowControlError(f"{field}: the key is longer than {MAX_KEY_CHARS} characters")
    return value


@dataclass(frozen=True)
class KeySlot:
    """One slot a run needs: which lock (one per key value) and what the key says.

    Attributes:
        lock: The key value's slot id (see `lock_id`).
        owner: The agent, or ``group-<name>`` for a group's keys.
        key: The key's value for this run.
        label: The key as people read it: ``conversation.id=c-42``.
        limit: How many runs may hold a slot of this key value at once.
        hold_while_waiting: A waiting run keeps the slot.
        on_busy: What a start for this key does when no slot is free.
        index: The key's place in the definition's ``concurrency`` list.
    """

    lock: str
    owner: str
    key: str
    label: str
    limit: int
    hold_while_waiting: bool
    on_busy: str
    index: int


def lock_id(owner: str, key: str, task_queue: str | None) -> str:
    """The slot id of one key value: ``{its shard's workflow id}/{its line}``.

    The line is a digest of the value (key values are any text, ids are not); the shard is
    that digest modulo `KEY_SHARDS`, so a value always lands in the same shard. Shards live on
    the task queue of the runs they serve (the workers that poll it run them), so runs of one
    key on two task queues keep two lines (a run started around DSMO's starters, with no queue
    named, has its locks on the queue of whichever run first needed them).
    """
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    place = f"{task_queue}." if task_queue else ""
    return f"dsmo-keys.{owner}.{place}{int(digest, 16) % KEY_SHARDS:02d}/{digest}"


def release_of(lock: str, run_id: str) -> tuple[str, dict[str, str]]:
    """The workflow to signal ``release`` to for ``run_id``'s slot of ``lock``, and the signal's argument."""
    shard, line = shard_of(lock)
    return shard, {"run_id": run_id, **({"line": line} if line is not None else {})}


def unsharded_lock_id(owner: str, key: str) -> str:
    """The lock of one key value as runs from before key locks were sharded took it: a workflow of its own."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"dsmo-slots.{owner}.{digest}"


def shard_of(lock: str) -> tuple[str, str | None]:
    """The workflow that keeps ``lock``'s line, and the line in it.

    A lock without a line is a workflow of its own: an agent's rate limit, or a key value's
    lock taken by a run started before key locks were sharded.
    """
    shard, _, line = lock.rpartition("/")  # the line is a hex digest; a task queue may hold a "/"
    return (shard, line) if shard else (lock, None)


def slots_of(
    agent: str,
    concurrency: Sequence[ConcurrencyKey],
    variables: Mapping[str, Any],
    task_queue: str | None,
    *,
    sharded: bool = True,
) -> list[KeySlot]:
    """The slots a run whose key locks live on ``task_queue`` needs, in the order it takes them.

    A run from before key locks were sharded (not ``sharded``) takes a lock per key value.

    Raises:
        FlowControlError: The input lacks a value a key reads (``concurrency.0.key: ...``).
    """
    slots = []
    for index, entry in enumerate(concurrency):
        key = render_key(f"concurrency.{index}.key", entry.key, variables)
        owner = agent if entry.scope == "agent" else entry.scope.replace(":", "-")
        template = entry.key.strip()
        name = template[2:-2].strip() if template.startswith("{{") and template.endswith("}}") else template
        slots.append(
            KeySlot(
                lock=lock_id(owner, key, task_queue) if sharded else unsharded_lock_id(owner, key),
                owner=owner,
                key=key,
                label=f"{name}={key}",
                limit=entry.limit,
                hold_while_waiting=entry.hold_while_waiting,
                on_busy=entry.on_busy,
                index=index,
            )
        )
    return sorted(slots, key=lambda slot: slot.lock)
