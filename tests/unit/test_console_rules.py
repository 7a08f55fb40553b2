"""The console's pure rules: sessions, CSRF tokens, task filters, forms and upload return addresses."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dsmo.client.task_list import FilterError, TaskFilter
from dsmo.server.console.auth import safe_next
from dsmo.server.console.forms import FORMS, TaskForm, event_data, field_errors
from dsmo.server.console.session import SESSION_SECONDS, Signer, key_fingerprint, load_secret
from dsmo.server.console.signed_out import SIGNED_OUT_FILE, SignedOut
from dsmo.server.console.uploads import return_path, return_valid
from dsmo.workflows.events.resume_events import EventRejected, well_formed

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_cookie_round_trips_and_expires() -> None:
    clock = Clock()
    signer = Signer(b"s" * 32, now=clock)
    cookie = signer.session_cookie("alice", "hash-1")
    session = signer.session(cookie)
    assert session is not None and session.key_name == "alice"
    assert session.key_fingerprint == key_fingerprint("hash-1") != key_fingerprint("hash-2")
    clock.now += SESSION_SECONDS + 1
    assert signer.session(cookie) is None


@pytest.mark.parametrize("cookie", ["", "no-dot", "a.b.c", "e30.AAAA"])
def test_a_malformed_or_forged_session_is_no_session(cookie: str) -> None:
    assert Signer(b"s" * 32).session(cookie) is None


def test_a_session_signed_with_another_secret_or_edited_is_refused() -> None:
    cookie = Signer(b"a" * 32).session_cookie("alice", "h")
    assert Signer(b"b" * 32).session(cookie) is None
    body, mac = cookie.split(".")
    assert Signer(b"a" * 32).session(body[:-2] + "xx." + mac) is None


def test_csrf_tokens_are_bound_to_their_session() -> None:
    signer = Signer(b"s" * 32)
    token = signer.csrf_token("session:alice")
    assert signer.csrf_valid(token, "session:alice")
    assert not signer.csrf_valid(token, "session:bob")
    assert not signer.csrf_valid(None, "session:alice")
    assert not signer.csrf_valid(token.split(".")[0] + ".forged", "session:alice")


def test_the_secret_is_created_once_and_private(tmp_path: Path) -> None:
    keys = tmp_path / "state" / "api-keys.json"
    first = load_secret(keys)
    assert load_secret(keys) == first and len(first) == 32
    assert (keys.with_name("console-secret").stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/console/runs/x", "/console/runs/x"),
        ("https://evil.example/console/", "/console/"),
        ("//evil.example/console/", "/console/"),
        ("/console/\\evil", "/console/"),
        (None, "/console/"),
    ],
)
def test_after_sign_in_only_console_paths_are_followed(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected


def test_filters_become_a_visibility_query() -> None:
    query = TaskFilter(kind="document", agent="employee-onboarding", assignee="ana@x.com", overdue=True).query(NOW)
    assert "WaitingFor IN ('document')" in query
    assert "AgentName = 'employee-onboarding'" in query and "WaitingOn = 'ana@x.com'" in query
    assert "WaitingUntil < '2026-11-23T12:00:00+00:00'" in query
    every = TaskFilter().query(NOW)
    assert "'response', 'document', 'signature', 'test', 'event'" in every and "agent" not in every.split("IN")[1]


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        (TaskFilter(kind="agent"), "kind"),
        (TaskFilter(agent="Bad Name!"), "agent"),
        (TaskFilter(assignee="x' OR '1'='1"), "assignee"),
        (TaskFilter(run="a\\b"), "run"),
    ],
)
def test_a_filter_that_could_break_the_query_is_refused_naming_its_field(filters: TaskFilter, field: str) -> None:
    with pytest.raises(FilterError, match=f"^{field}: "):
        filters.check()


def test_a_filled_form_becomes_the_event_data() -> None:
    assert event_data(FORMS["response"], {"text": "  hola  "}) == {"text": "hola"}
    assert event_data(FORMS["event"], {"result": "", "notes": "sala B"}) == {"data": {"notes": "sala B"}}
    assert event_data(FORMS["test"], {"score": "87", "result": "passed"}) == {"score": "87", "result": "passed"}


def form_errors(form: TaskForm, data: dict[str, Any], event_id: str = "console-1") -> dict[str, str]:
    """The errors a filled form shows: where `well_formed`'s refusal goes (none when it is well formed)."""
    try:
        well_formed(form.event_type, event_id, data)
    except EventRejected as problem:
        return field_errors(form, problem)
    return {}


def test_errors_are_placed_beside_their_fields() -> None:
    assert form_errors(FORMS["test"], {"score": "eighty", "result": "passed"}) == {"score": "must be a number"}
    assert set(form_errors(FORMS["response"], {})) == {"text"}
    assert form_errors(FORMS["signature"], {"signedDocumentUrl": "https://x/s.pdf"}) == {}


def test_a_refusal_of_no_form_field_is_shown_above_the_form_as_every_way_in_words_it() -> None:
    assert form_errors(FORMS["response"], {"text": "hola"}, event_id="e1\n") == {
        "_form": "MESSAGE_RECEIVED.event_id 'e1\\n': use 1-200 printable characters, without control characters "
        "or surrounding blanks"
    }
    assert form_errors(FORMS["event"], {"data": {"notes": "x" * 70_000}}) == {
        "_form": "EVENT_COMPLETED.data: 70023 bytes, above the 65536-byte limit (store large content as an artifact "
        "and send its URI)"
    }


def test_an_upload_return_address_is_valid_only_for_its_session_run_document_and_event() -> None:
    signer = Signer(b"s" * 32)
    path = return_path(signer, "session:a", "run-1", "id_card", "console-1")
    signature = path.rsplit("/", 1)[-1]
    assert path.startswith("/console/runs/run-1/uploaded/id_card/console-1/")
    assert return_valid(signer, "session:a", "run-1", "id_card", "console-1", signature)
    for changed in (
        ("session:b", "run-1", "id_card", "console-1"),
        ("session:a", "run-2", "id_card", "console-1"),
        ("session:a", "run-1", "diploma", "console-1"),
        ("session:a", "run-1", "id_card", "console-2"),
    ):
        assert not return_valid(signer, *changed, signature)


def test_each_sign_in_is_its_own_session() -> None:
    signer = Signer(b"s" * 32, now=Clock())
    first, second = (signer.session(signer.session_cookie("alice", "hash-1")) for _ in range(2))
    assert first is not None and second is not None
    assert first.session_id != second.session_id and first.binding != second.binding


def test_a_signed_out_session_is_refused_by_every_server_until_it_would_have_expired(tmp_path: Path) -> None:
    clock = Clock()
    keys = tmp_path / "api-keys.json"
    one, other = SignedOut(keys, now=clock), SignedOut(keys, now=clock)  # two servers, one key file
    assert "s-1" not in one
    one.add("s-1", expires=int(clock.now) + 60)
    assert "s-1" in one and "s-1" in other and "s-2" not in other
    assert (tmp_path / SIGNED_OUT_FILE).stat().st_mode & 0o777 == 0o600
    clock.now += 61  # expired: the cookie is refused anyway, so the next sign-out drops the entry
    other.add("s-2", expires=int(clock.now) + 60)
    assert (tmp_path / SIGNED_OUT_FILE).read_text().split() == ["s-2", str(int(clock.now) + 60)]
    assert "s-2" in one
