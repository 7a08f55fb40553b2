"""The README stays short, and the definition and Python it shows are real."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dsmo import __all__ as public_names
from dsmo.client.definition_files import parse_definition_text

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_is_at_most_15_kb() -> None:
    assert len(README.read_bytes()) <= 15 * 1024


def test_the_readme_definition_validates() -> None:
    (block,) = _blocks("yaml")
    definition = parse_definition_text(block, source="README.md")
    assert definition.agent == "candidate-screening" and definition.start == "profile"


def test_the_readme_python_uses_only_the_public_api() -> None:
    blocks = _blocks("python")
    assert blocks
    for block in blocks:
        tree = ast.parse(block.replace("await ", ""))
        imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names]
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        plain = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        modules |= plain
        # `import dsmo` then `dsmo.agent`: the attributes are public names too.
        used = (
            set()
            if "dsmo" not in plain
            else {
                node.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "dsmo"
            }
        )
        assert modules == {"dsmo"} and set(imported) | used <= set(public_names)
