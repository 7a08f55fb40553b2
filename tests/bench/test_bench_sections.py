"""BENCHMARKS.md's one splicer: a study rewriting its section leaves every other byte as it was,
and `python -m bench` runs one study a call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.__main__ import STUDIES, main, make_study
from bench.paths import BENCHMARKS
from bench.sections import existing, splice, write_section

PAGE = BENCHMARKS.read_text()
MARKERS = [(m.group(0), m.group(0).replace(":start", ":end")) for m in re.finditer(r"<!-- [\w-]+:start -->", PAGE)]


def test_the_page_has_its_sections() -> None:
    names = {start.split()[1].split(":")[0] for start, _ in MARKERS}
    assert {"reliability", "hostile", "hostile-loop", "hostile-llm", "w5", "scale"} <= names


@pytest.mark.parametrize("markers", MARKERS, ids=[start for start, _ in MARKERS])
def test_splicing_a_section_with_its_own_text_changes_nothing(markers: tuple[str, str], tmp_path: Path) -> None:
    page = tmp_path / "BENCHMARKS.md"
    page.write_text(PAGE)
    text = existing(PAGE, *markers)
    assert text is not None
    write_section(text, markers, page)
    assert page.read_text() == PAGE


def test_a_new_section_replaces_only_its_own() -> None:
    start, end = MARKERS[0]
    new = splice(PAGE, f"{start}\nnew\n{end}", start, end)
    assert existing(new, start, end) == f"{start}\nnew\n{end}"
    assert all(existing(new, *other) == existing(PAGE, *other) for other in MARKERS[1:])
    assert splice("# Benchmarks\n", "<!-- x:start -->1<!-- x:end -->", "<!-- x:start -->", "<!-- x:end -->") == (
        "# Benchmarks\n\n<!-- x:start -->1<!-- x:end -->\n"
    )


def test_a_missing_page_is_started_with_its_title(tmp_path: Path) -> None:
    page = tmp_path / "BENCHMARKS.md"
    write_section("<!-- x:start -->1<!-- x:end -->", ("<!-- x:start -->", "<!-- x:end -->"), page)
    assert page.read_text() == "# Benchmarks\n\n<!-- x:start -->1<!-- x:end -->\n"


@pytest.mark.parametrize(
    "study",
    [
        "all",
        "table1",
        "floor",
        "w5",
        "scale",
        "migrate",
        "what-if",
        "flow",
        "subjects",
        "peers",
        "hostile",
        "reliability",
    ],
)
def test_every_study_is_a_subcommand_with_an_example(study: str) -> None:
    result = CliRunner().invoke(main, [study, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_study_answers_to_its_name_and_owns_a_section_of_the_page(name: str) -> None:
    study = make_study(name, update=True)
    assert study.name == name
    if study.markers is not None:  # `all` writes the page whole; `floor` only prints
        assert existing(PAGE, *study.markers) is not None
