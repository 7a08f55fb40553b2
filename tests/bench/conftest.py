"""`registry_restored`: a test leaves the process's agent registry as it found it.

W6's tests import DSMO's contender module, whose agents register themselves on import (as a
plugin's do); the unit tests of the built-in catalog share the process under `-n`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsmo.activities.processors import default_registry


@pytest.fixture
def registry_restored() -> Iterator[None]:
    """The default agent registry as it was before the test, after it."""
    before = {name: dict(versions) for name, versions in default_registry._by_name.items()}
    yield
    default_registry._by_name.clear()
    default_registry._by_name.update(before)
