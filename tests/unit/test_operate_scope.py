"""The `operate` scope (moving runs between versions) is a key scope like the others, given only when asked."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dsmo.cli.main import cli
from dsmo.server.api_keys import KeyStore


def test_dsmo_keys_add_accepts_the_operate_scope(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    env = {"DSMO_API_KEYS_FILE": str(keys_file), "DSMO_STATE_DIR": str(tmp_path)}
    result = CliRunner().invoke(cli, ["keys", "add", "ops", "--scope", "operate", "--scope", "read"], env=env)
    assert result.exit_code == 0, result.output
    [key] = KeyStore(keys_file).load()
    assert key.scopes == ["operate", "read"]
    assert key.allows("operate") and not key.allows("cancel")


def test_no_other_scope_implies_operate(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    store.add("everything-else", ["start", "read", "cancel", "events:*"])
    [key] = store.load()
    assert not key.allows("operate")
