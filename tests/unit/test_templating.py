from __future__ import annotations

import pytest

from dsmo.workflows.common.errors import TemplateError
from dsmo.workflows.common.templating import lookup, placeholders, render

VARS = {"candidate": {"name": "Ana", "tags": ["a", "b"]}, "documentUrls": ["s3://b/1"], "n": 3, "obj": {"k": 1}}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Hola {{candidate.name}}", "Hola Ana"),
        ("{{ candidate.name }}!", "Ana!"),
        ("{{documentUrls[0]}}", "s3://b/1"),
        ("{{candidate.tags[1]}}", "b"),
        ("n={{n}} obj={{obj}}", 'n=3 obj={"k":1}'),
        ("no placeholders", "no placeholders"),
        ("{{missing | default('fallback')}}", "fallback"),
        ('{{missing|default("")}}.', "."),
        ("{{candidate.name | default('x')}}", "Ana"),
    ],
)
def test_render(template: str, expected: str) -> None:
    assert render(template, VARS) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{lastResponse}}", "variable lastResponse is missing"),
        ("{{candidate.phone}}", "variable candidate.phone is missing"),
        ("{{documentUrls[3]}}", r"variable documentUrls\[3\] is missing"),
        ("{{candidate.name.first}}", "variable candidate.name.first is missing"),
    ],
)
def test_missing_variable_is_an_error_naming_it(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(template, VARS)


@pytest.mark.parametrize("template", ["{{ 1+1 }}", "{{__import__('os')}}", "{{a.__class__}}x{{", "{{ a b }}", "{{}}"])
def test_anything_but_a_path_is_refused(template: str) -> None:
    if template == "{{a.__class__}}x{{":
        # Dunder names are plain keys in a mapping here, never attribute access.
        with pytest.raises(TemplateError, match="missing"):
            render(template, {"a": {}})
        return
    with pytest.raises(TemplateError, match="invalid placeholder"):
        placeholders(template)


def test_lookup_does_not_touch_python_attributes() -> None:
    with pytest.raises(TemplateError):
        lookup({"s": "text"}, "s.upper")


def test_render_values_keeps_types_of_whole_placeholders() -> None:
    from dsmo.workflows.common.templating import render_values

    rendered = render_values(
        {
            "c": "{{candidate}}",
            "n": "{{n}}",
            "s": "hi {{candidate.name}}",
            "l": ["{{n}}", 2],
            "d": "{{x | default('y')}}",
        },
        VARS,
    )
    assert rendered == {"c": VARS["candidate"], "n": 3, "s": "hi Ana", "l": [3, 2], "d": "y"}


@pytest.mark.parametrize(
    "template",
    ["{{ " + " " * 40_000, "{{ " * 13_000, "{{" + "a" * 40_000, "{{ a |" + " " * 40_000 + "}}"],
    ids=["open-then-blanks", "many-opens", "open-then-text", "long-placeholder"],
)
def test_adversarial_templates_are_scanned_in_linear_time(template: str) -> None:
    # Quadratic scanning took 459 s on the first of these (the suite's timeout would catch it).
    try:
        assert placeholders(template) == []
    except TemplateError as err:
        assert "invalid placeholder" in str(err)
