"""Every Python example that runs a client program leaves with `hard_exit`, not a bare `asyncio.run`.

A bare ``asyncio.run(main())`` can abort at interpreter exit (``PyGILState_Release``) once the
Temporal client's threads are running; `dsmo.hard_exit` flushes and leaves without that teardown.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, block in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")), 1):
            found.append((f"{page.relative_to(ROOT)} block {number}", block))
    for script in sorted((ROOT / "examples").rglob("*.py")):
        found.append((str(script.relative_to(ROOT)), script.read_text(encoding="utf-8")))
    return found


def test_examples_that_run_a_client_leave_with_hard_exit() -> None:
    running = [(where, code) for where, code in _examples() if "asyncio.run(" in code]
    assert running, "no example runs a client program any more: this check looks in the wrong place"
    bare = [where for where, code in running if "hard_exit(" not in code]
    assert not bare, f"end these with hard_exit (dsmo.hard_exit): {bare}"
