"""BENCHMARKS.md's sections: each study owns the text between its two markers, and only that.

The one splicer every study uses, so a study rewriting its section leaves the others byte for
byte as they were.
"""

from __future__ import annotations

from pathlib import Path

from bench.paths import BENCHMARKS

# A page that does not exist yet starts with this title (only `make reliability` may create it).
EMPTY_PAGE = "# Benchmarks\n"


def splice(page: str, new_section: str, start: str, end: str) -> str:
    """``page`` with its section between ``start`` and ``end`` replaced by ``new_section``.

    Args:
        page: BENCHMARKS.md's text.
        new_section: the section's new text, markers included.
        start: the section's opening marker.
        end: the section's closing marker.

    Returns:
        The page with the section replaced, or appended at the end if the page has none yet.
    """
    if start in page and end in page:
        head, rest = page.split(start, 1)
        return head + new_section + rest.split(end, 1)[1]
    return page.rstrip("\n") + "\n\n" + new_section + "\n"


def existing(page: str, start: str, end: str) -> str | None:
    """The section of ``page`` between ``start`` and ``end``, markers included; None if absent."""
    if start in page and end in page:
        return start + page.split(start, 1)[1].split(end, 1)[0] + end
    return None


def write_section(text: str, markers: tuple[str, str], page: Path = BENCHMARKS) -> None:
    """Replace one section of ``page`` (BENCHMARKS.md) by ``text`` in the file itself.

    Args:
        text: the section's text, markers included.
        markers: its opening and closing markers.
        page: the file; one that does not exist yet is started with its title.
    """
    old = page.read_text() if page.exists() else EMPTY_PAGE
    page.write_text(splice(old, text, *markers))
