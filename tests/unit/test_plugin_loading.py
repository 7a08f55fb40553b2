"""The plugin API's registries: what registration accepts and refuses, and how declared schemas check documents."""

from __future__ import annotations

import asyncio
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsmo.activities import plugin_loading, plugins
from dsmo.activities.actions import ActionContext, ActionRegistry, FunctionAction
from dsmo.activities.contract_schemas import SchemaDoesNotCompile, compile_schema
from dsmo.activities.maybe_async import call_maybe_async
from dsmo.activities.messaging import ChannelRegistry
from dsmo.activities.plugin_errors import ContractViolation, PluginError
from dsmo.activities.plugin_loading import DEV_ENTRY_POINT_GROUP, entry_point_modules, load_plugins, split_modules
from dsmo.activities.processors import ProcessorOutput, ProcessorRegistry, as_output
from dsmo.config.settings import Settings


class Order(BaseModel):
    sku: str
    quantity: int


def test_a_pydantic_model_and_a_json_schema_check_alike() -> None:
    for source in (
        Order,
        {"type": "object", "required": ["sku", "quantity"], "properties": {"quantity": {"type": "integer"}}},
    ):
        schema = compile_schema(source)
        assert schema is not None
        schema.check({"sku": "lamp", "quantity": 2}, agent="a", what="input")
        with pytest.raises(ContractViolation, match="input does not match its schema: quantity: is required"):
            schema.check({"sku": "lamp"}, agent="a", what="input")
        with pytest.raises(ContractViolation, match="quantity: is not of type 'integer'"):
            schema.check({"sku": "lamp", "quantity": "two"}, agent="a", what="input")


def test_a_schema_that_does_not_compile_is_refused() -> None:
    with pytest.raises(SchemaDoesNotCompile, match="type"):
        compile_schema({"type": "nonsense"})
    with pytest.raises(SchemaDoesNotCompile, match="pydantic model class or a JSON Schema"):
        compile_schema(42)  # type: ignore[arg-type]


def test_registration_refuses_a_wrong_signature_a_bad_schema_and_a_second_function() -> None:
    registry = ProcessorRegistry()

    def one(document: Any) -> Any:
        return document

    with pytest.raises(
        PluginError, match=r"agent one@1.0.0: .*one\(document: 'Any'\) -> 'Any' must take \(document, message\)"
    ):
        registry.register("one")(one)  # type: ignore[arg-type]
    with pytest.raises(PluginError, match=r"agent strict@1\.0\.0: a schema does not compile"):
        registry.register("strict", input_schema={"type": 3})(lambda document, message: ({}, {}))

    def first(document: Any, message: Any) -> Any:
        return {}, {}

    def second(document: Any, message: Any) -> Any:
        return {}, {}

    registry.register("twice")(first)
    registry.register("twice")(first)  # the same function again: a module imported twice
    with pytest.raises(PluginError, match=r"agent twice@1\.0\.0 is registered twice"):
        registry.register("twice")(second)
    registry.register("twice", version="2.0.0")(second)
    assert registry.get("twice").fn is second and registry.get("twice", "1.0.0").fn is first


def test_an_async_processor_is_recognised_and_awaited() -> None:
    registry = ProcessorRegistry()

    @registry.register("awaits")
    async def awaits(document: Any, message: Any) -> Any:
        await asyncio.sleep(0)
        return {"seen": document}, {"ok": True}

    processor = registry.get("awaits")
    assert processor.is_async
    with ThreadPoolExecutor(max_workers=1) as threads:
        result = asyncio.run(call_maybe_async(threads, processor.fn, {"x": 1}, None))
    assert as_output(result, agent="awaits") == ProcessorOutput({"seen": {"x": 1}}, {"ok": True})


def test_a_processor_returns_an_output_or_a_pair() -> None:
    assert as_output(ProcessorOutput({"a": 1}), agent="x").document == {"a": 1}
    assert as_output(({"a": 1}, None), agent="x").summary == {}
    with pytest.raises(ContractViolation, match="returns ProcessorOutput or \\(document, summary\\), not dict"):
        as_output({"a": 1}, agent="x")


def test_actions_and_channels_refuse_a_second_registration_under_one_name() -> None:
    actions = ActionRegistry()

    def run(data: Any, ctx: Any) -> Any:
        return {}

    actions.add(FunctionAction("pay", run))
    actions.add(FunctionAction("pay", run))
    with pytest.raises(PluginError, match="action pay is registered twice"):
        actions.add(FunctionAction("pay", lambda data, ctx: {"other": True}))
    channels = ChannelRegistry()
    channels.add("sms", lambda settings: None)
    with pytest.raises(PluginError, match="channel sms is registered twice"):
        channels.add("sms", lambda settings: None)
    assert channels.build(Settings()) == {}  # a factory that returns None is not offered


def test_a_function_action_without_a_compensation_is_not_compensatable() -> None:
    ctx = ActionContext("run-1", "pay", "op:run-1:pay", 1)
    plain = FunctionAction("pay", lambda data, ctx: {"paid": data["amount"]})
    assert plain.execute({"amount": 3}, ctx) == {"paid": 3}
    assert not plain.is_compensatable({}) and plain.compensate({}, ctx) is False


def test_plugin_modules_come_from_entry_points_and_dsmo_load() -> None:
    loaded = load_plugins()
    # DSMO's own entry point offers only what every deployment needs; its examples load when asked.
    assert "dsmo.activities.channels" in loaded and not any(name.startswith("dsmo_examples") for name in loaded)
    assert load_plugins(split_modules("dsmo_examples"), entry_points=False) == ["dsmo_examples"]
    assert entry_point_modules(DEV_ENTRY_POINT_GROUP) == ["dsmo_examples"]  # the embedded stack's worker loads it
    assert split_modules(" a.b, ,c ") == ["a.b", "c"]
    with pytest.raises(PluginError, match="plugin no_such_module_xyz: module not found"):
        load_plugins(["no_such_module_xyz"], entry_points=False)


@pytest.mark.parametrize("name", ["h4b-nl\n", "ok\n", "Upper", "a b", "-lead", ""])
def test_a_name_with_anything_after_it_is_refused_for_agents_actions_and_channels(name: str) -> None:
    # `$` alone also matches before a trailing newline: the whole name must match.
    for register in (plugins.agent, plugins.action, plugins.channel):
        with pytest.raises(PluginError, match=r"a name is lower case letters, digits and dashes"):
            register(name)


def test_a_plugin_that_exits_at_import_is_one_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "quits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as caught:
        load_plugins(["quits_at_import"], entry_points=False)
    assert str(caught.value) == "plugin quits_at_import: import failed: the module exits at import (SystemExit: 3)"


def test_a_slow_import_is_named_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The plugin's import blocks until the progress line has been logged: no clock decides the test.
    (tmp_path / "slow_gate.py").write_text("import threading\nrelease = threading.Event()\n")
    (tmp_path / "slow_plugin.py").write_text(
        "from slow_gate import release\nassert release.wait(30), 'no progress line was logged'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import slow_gate  # type: ignore[import-not-found]

    class Releases(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "still importing" in record.getMessage():
                slow_gate.release.set()

    monkeypatch.setattr(plugin_loading, "PROGRESS_EVERY", 0.01)
    handler = Releases()
    logging.getLogger("dsmo.plugins").addHandler(handler)
    try:
        with caplog.at_level(logging.WARNING, logger="dsmo.plugins"):
            assert load_plugins(["slow_plugin"], entry_points=False) == ["slow_plugin"]
    finally:
        logging.getLogger("dsmo.plugins").removeHandler(handler)
    assert re.fullmatch(r"still importing plugin slow_plugin \(\d+ s\)", caplog.records[0].getMessage())
