"""Write the module tables of docs/architecture.md from the modules' own docstrings.

Run from the repository's root: ``python docs/gen_module_table.py`` rewrites the tables in place;
``python docs/gen_module_table.py --check`` changes nothing and exits 1, with a diff, when the page
is stale. It imports nothing from `dsmo` (it reads the files), so it runs on a broken tree too.

The page marks each generated block with a pair of HTML comments naming folder prefixes::

    <!-- module-tables: dsmo/workflows -->
    ...written by this script...
    <!-- end module-tables -->

Every folder of the source trees with a module in it lands in exactly one block, the one whose
prefix is the longest that contains it, as one table per folder (a "room"), a row per module:
its path and the first sentence of its docstring. A folder no block claims, or a module without
a docstring, is an error, so a new room or module cannot slip past the page.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
# The trees the page maps: the installed package, the benchmark harness, the examples distribution.
TREES = ("dsmo", "bench", "examples/dsmo_examples")
# The user project `dsmo init` copies is a template, not part of DSMO's code.
SKIPPED_PARTS = {"project_template", "__pycache__"}
BLOCK = re.compile(
    r"(?P<open><!-- module-tables: (?P<prefixes>[^>]*?) -->\n)(?P<body>.*?)(?P<close><!-- end module-tables -->)",
    re.DOTALL,
)
# Where a docstring's first sentence ends: a full stop (or ? !) before a space and a capital or a quote.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"])")


class PageError(Exception):
    """The page or the code cannot be mapped: a missing docstring, an unclaimed folder, no markers."""


def modules(root: Path = ROOT) -> dict[str, list[str]]:
    """The modules of every source tree, by folder (both as paths from the repository's root).

    Args:
        root: The repository's root.

    Returns:
        Folder -> its modules' paths, sorted; ``__init__.py`` files are left out.
    """
    found: dict[str, list[str]] = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            relative = path.relative_to(root)
            if path.name == "__init__.py" or SKIPPED_PARTS & set(relative.parts):
                continue
            found.setdefault(relative.parent.as_posix(), []).append(relative.as_posix())
    return dict(sorted(found.items()))


def summary(path: Path) -> str:
    """A module's row: the first sentence of its docstring's first paragraph, on one line.

    Args:
        path: The module's file.

    Returns:
        The sentence, with ``|`` escaped for a Markdown table.

    Raises:
        PageError: The module has no docstring.
    """
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    if not docstring:
        raise PageError(f"{path}: no module docstring (its first sentence is the page's row for it)")
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    end = SENTENCE_END.search(paragraph)
    sentence = paragraph[: end.start()] if end else paragraph
    return sentence.replace("|", "\\|")


def _owner(folder: str, prefixes: list[str]) -> str | None:
    claiming = [p for p in prefixes if folder == p or folder.startswith(p + "/")]
    return max(claiming, key=len, default=None)


def tables(prefixes: list[str], root: Path = ROOT) -> dict[str, str]:
    """The Markdown each block holds: one table per folder it claims.

    Args:
        prefixes: Every block's prefixes, in the order the page has them (space-separated per block).
        root: The repository's root.

    Returns:
        Block prefixes (as written in the marker) -> the block's text.

    Raises:
        PageError: A folder no block claims, or a module without a docstring.
    """
    flat = [p for block in prefixes for p in block.split()]
    bodies: dict[str, list[str]] = {block: [] for block in prefixes}
    for folder, paths in modules(root).items():
        owner = _owner(folder, flat)
        if owner is None:
            raise PageError(f"no '<!-- module-tables: ... -->' block in docs/architecture.md claims {folder}/")
        block = next(b for b in prefixes if owner in b.split())
        rows = [f"| `{path}` | {summary(root / path)} |" for path in paths]
        bodies[block].append("\n".join([f"#### `{folder}/`", "", "| module | role |", "|---|---|", *rows, ""]))
    return {block: "\n".join(parts) for block, parts in bodies.items()}


def render(page: str, root: Path = ROOT) -> str:
    """The page with every generated block rewritten from the code as it is now.

    Args:
        page: The page's current text.
        root: The repository's root.

    Returns:
        The page's text as the generator writes it.

    Raises:
        PageError: The page has no block, or the code cannot be mapped (see `tables`).
    """
    blocks = [match["prefixes"].strip() for match in BLOCK.finditer(page)]
    if not blocks:
        raise PageError("docs/architecture.md has no '<!-- module-tables: ... -->' block")
    written = tables(blocks, root)
    return BLOCK.sub(lambda m: m["open"] + "\n" + written[m["prefixes"].strip()] + "\n" + m["close"], page)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page's tables, or with ``--check`` report whether they are stale.

    Args:
        argv: The command line's arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 when written or up to date, 1 when ``--check`` found a difference.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the page is stale")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    fresh = render(page)
    if fresh == page:
        return 0
    if args.check:
        diff = difflib.unified_diff(page.splitlines(), fresh.splitlines(), "page", "generated", lineterm="")
        print("\n".join(diff))
        print("docs/architecture.md is stale: run `python docs/gen_module_table.py`", file=sys.stderr)
        return 1
    PAGE.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
