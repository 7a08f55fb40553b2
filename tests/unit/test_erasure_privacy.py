"""What goes into the trail and the flow-control workflows instead of a subject's values (pure parts)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dsmo.activities.contract_schemas import compile_schema
from dsmo.activities.messaging import remove_outbox_messages
from dsmo.activities.plugin_errors import ContractViolation
from dsmo.workflows.definition.flow_control import lock_id
from dsmo.workflows.definition.sensitive import fingerprint, key_digest, masked_key_label, masked_wait_data
from dsmo.workflows.flow.key_locks import KeyLocksState
from dsmo.workflows.flow.rate_limiter import LimiterState
from dsmo.workflows.flow.throttle_bucket import BucketState

KEY = b"k" * 32


def test_a_key_digest_is_the_one_its_lock_s_id_carries_and_is_taken_once() -> None:
    digest = key_digest("K-17")
    assert digest == "sha256:" + hashlib.sha256(b"K-17").hexdigest()[:24]
    assert lock_id("agent", "K-17", "q").endswith("/" + digest.removeprefix("sha256:"))
    assert key_digest(digest) == digest and key_digest("") == ""


def test_a_subject_s_key_label_and_wait_name_the_person_by_a_keyed_fingerprint() -> None:
    assert masked_key_label("applicant.id=K-17", "K-17", KEY) == f"applicant.id={fingerprint('K-17', KEY)}"
    assert masked_key_label("applicant.id=K-17", "K-17", None) == "applicant.id=K-17"
    waiting = {"expectedFrom": "ana@example.com", "to": "b@x", "threadId": "t-ana", "title": "Ana's contract"}
    shown = masked_wait_data({**waiting, "documents": ["passport"], "attempt": 1}, KEY)
    assert all(shown[name] == fingerprint(value, KEY) for name, value in waiting.items())
    assert shown["documents"] == ["passport"] and shown["attempt"] == 1  # what is asked for stays readable
    assert masked_wait_data({"expectedFrom": "ana@example.com"}, None) == {"expectedFrom": "ana@example.com"}


def test_flow_control_state_from_before_keeps_only_the_digest() -> None:
    old_shard = KeyLocksState.model_validate({"owner": "a", "lines": {"abc": {"key": "K-17", "holders": ["r1"]}}})
    assert old_shard.lines["abc"].key == key_digest("K-17") and old_shard.lines["abc"].holders == ["r1"]
    bucket = BucketState.model_validate({"owner": "a", "key": "K-17", "limit": 1, "periodSeconds": 60})
    assert bucket.key == key_digest("K-17")
    assert LimiterState(agent="a", key="K-17").key == key_digest("K-17")
    assert LimiterState(agent="a").key is None
    assert "K-17" not in old_shard.model_dump_json() + bucket.model_dump_json()


@pytest.mark.parametrize(
    ("rule", "value", "says"),
    [
        ({"type": "string", "pattern": "^X-"}, "K-17-secret", "does not match '^X-'"),
        ({"enum": ["a", "b"]}, "K-17-secret", "is not one of the values the schema allows"),
        ({"type": "integer"}, "K-17-secret", "is not of type 'integer'"),
        ({"maxLength": 3}, "K-17-secret", "is longer than 3 character(s)"),
        ({"const": "x"}, "K-17-secret", "is not the value the schema requires"),
        ({"not": {"type": "string"}}, "K-17-secret", "fails the schema's 'not' rule"),
    ],
)
def test_a_contract_violation_names_the_field_and_rule_never_the_value(
    rule: dict[str, object], value: str, says: str
) -> None:
    schema = compile_schema({"type": "object", "properties": {"id": rule}})
    assert schema is not None
    with pytest.raises(ContractViolation) as raised:
        schema.check({"id": value}, agent="a", what="output")
    assert str(raised.value) == f"agent a: output does not match its schema: id: {says}"
    assert value not in str(raised.value)


def test_erasure_removes_only_the_runs_outbox_folders(tmp_path: Path) -> None:
    for run in ("run-1", "run-2"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "m.json").write_text("{}")
    assert remove_outbox_messages(tmp_path, ["run-1", "..", "missing", "run-1/../run-2"]) == 1
    assert not (tmp_path / "run-1").exists() and (tmp_path / "run-2" / "m.json").exists()
    assert remove_outbox_messages(tmp_path / "absent", ["run-2"]) == 0
