"""docs/gen_module_table.py: a module's row is its docstring's first sentence, a table per folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_architecture_page import GEN

PAGE = """# Map

<!-- module-tables: dsmo -->
<!-- end module-tables -->

Between the blocks, prose stays as written.

<!-- module-tables: dsmo/workflows bench -->
old rows
<!-- end module-tables -->
"""


def _tree(root: Path) -> Path:
    files = {
        "dsmo/worker.py": '"""The worker process.\n\nMore about it."""\n',
        "dsmo/__init__.py": '"""Not a row."""\n',
        "dsmo/cli/main.py": '"""`dsmo run|stop`: the commands, wrapped\nover two lines. Then more."""\n',
        "dsmo/workflows/run/intake.py": '"""Events in: applied now, or kept (e.g. for later)."""\n',
        "bench/runner.py": '"""Run the benchmark."""\n',
        "dsmo/scaffold/project_template/x.py": "",  # the user project `dsmo init` copies: not DSMO's
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_one_table_per_folder_in_the_block_with_the_longest_prefix(tmp_path: Path) -> None:
    page = GEN.render(PAGE, _tree(tmp_path))
    assert "old rows" not in page and "Between the blocks, prose stays as written." in page
    first, second = page.split("Between the blocks")
    assert "#### `dsmo/`" in first and "#### `dsmo/cli/`" in first and "intake" not in first
    assert "#### `bench/`" in second and "#### `dsmo/workflows/run/`" in second
    assert "| `dsmo/worker.py` | The worker process. |" in first
    assert "| `dsmo/cli/main.py` | `dsmo run\\|stop`: the commands, wrapped over two lines. |" in first
    assert "| `dsmo/workflows/run/intake.py` | Events in: applied now, or kept (e.g. for later). |" in second
    assert "__init__" not in page and "project_template" not in page
    assert GEN.render(page, tmp_path) == page, "writing twice changes nothing"


def test_a_new_module_or_a_changed_docstring_changes_the_page(tmp_path: Path) -> None:
    page = GEN.render(PAGE, _tree(tmp_path))
    (tmp_path / "dsmo/cli/extra.py").write_text('"""An extra command."""\n')
    assert "| `dsmo/cli/extra.py` | An extra command. |" in GEN.render(page, tmp_path)
    (tmp_path / "dsmo/worker.py").write_text('"""The worker, renamed."""\n')
    assert "The worker, renamed." in GEN.render(page, tmp_path)


def test_a_module_without_a_docstring_or_an_unclaimed_folder_is_an_error(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "dsmo/cli/bare.py").write_text("X = 1\n")
    with pytest.raises(GEN.PageError, match=r"dsmo/cli/bare.py: no module docstring"):
        GEN.render(PAGE, tmp_path)
    (tmp_path / "dsmo/cli/bare.py").unlink()
    (tmp_path / "examples/dsmo_examples").mkdir(parents=True)
    (tmp_path / "examples/dsmo_examples/agent.py").write_text('"""An agent."""\n')
    with pytest.raises(GEN.PageError, match=r"claims examples/dsmo_examples/"):
        GEN.render(PAGE, tmp_path)
    with pytest.raises(GEN.PageError, match="no '<!-- module-tables"):
        GEN.render("# no markers\n", tmp_path)


def test_the_command_finds_the_real_page_up_to_date() -> None:
    assert GEN.main(["--check"]) == 0
