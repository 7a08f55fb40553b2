"""Every public name of `dsmo` is documented the Google way: the API reference is built from these."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
from pydantic import BaseModel

import dsmo

# The public names: `dsmo`'s, and those of its two namespaces, `dsmo.errors` and `dsmo.settings`.
PUBLIC = {
    name: getattr(namespace, name)
    for namespace in (dsmo, dsmo.errors, dsmo.settings)
    for name in namespace.__all__
    if not inspect.ismodule(getattr(namespace, name))
}


def _public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, obj in PUBLIC.items():
        if not inspect.isclass(obj):
            yield name, obj
            continue
        if issubclass(obj, BaseException):
            continue
        for member, value in vars(obj).items():
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if not member.startswith("_") and inspect.isfunction(function):
                yield f"{name}.{member}", function


# A shortcut documents itself by naming the public method it is ("...: `RunHandle.status`."): the
# reference is written once, there. It may take only that method's parameters (and the run's id).
SHORTCUT = re.compile(r"`(\w+)\.(\w+)`\.?\"*$")


def _shortcut_target(function: Callable[..., Any], doc: str) -> Callable[..., Any] | None:
    found = SHORTCUT.search(doc.strip().splitlines()[0]) if "\n" not in doc.strip() else None
    if found is None or found.group(1) not in PUBLIC:
        return None
    target = getattr(PUBLIC[found.group(1)], found.group(2), None)
    if target is None or not inspect.isfunction(target):
        return None
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    own = {p.name for p in inspect.signature(function).parameters.values() if p.kind in named} - {"self", "run_id"}
    return target if own <= set(inspect.signature(target).parameters) else None


def _missing_sections(function: Callable[..., Any]) -> list[str]:
    doc = inspect.getdoc(function) or ""
    if not doc:
        return ["a docstring"]
    target = _shortcut_target(function, doc)
    if target is not None:
        return _missing_sections(target)
    signature = inspect.signature(function, eval_str=True)
    missing = []
    if any(parameter not in ("self", "cls") for parameter in signature.parameters) and "Args:" not in doc:
        missing.append("Args:")
    returns = signature.return_annotation
    if returns not in (None, NoReturn, inspect.Signature.empty) and not ("Returns:" in doc or "Yields:" in doc):
        missing.append("Returns:")
    return missing


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_has_a_docstring(name: str) -> None:
    assert inspect.getdoc(PUBLIC[name]), f"dsmo.{name} has no docstring"


@pytest.mark.parametrize(
    ("qualified", "function"), [pytest.param(name, function, id=name) for name, function in _public_callables()]
)
def test_public_functions_document_their_arguments_and_result(qualified: str, function: Callable[..., Any]) -> None:
    assert not _missing_sections(function), f"dsmo.{qualified} lacks {_missing_sections(function)}"


PUBLIC_MODELS = [value for value in PUBLIC.values() if isinstance(value, type) and issubclass(value, BaseModel)]


@pytest.mark.parametrize("model", PUBLIC_MODELS, ids=lambda model: model.__name__)
def test_public_models_document_every_field(model: type[BaseModel]) -> None:
    doc = inspect.getdoc(model) or ""
    undocumented = [
        field for field, info in model.model_fields.items() if not info.description and f"{field}:" not in doc
    ]
    assert not undocumented, f"{model.__name__}: add these to its Attributes section: {undocumented}"


def test_settings_document_every_field() -> None:
    doc = inspect.getdoc(dsmo.Settings) or ""
    undocumented = [name for name in dsmo.Settings.__dataclass_fields__ if f"{name}:" not in doc]
    assert not undocumented, f"Settings: add these to its Attributes section: {undocumented}"
