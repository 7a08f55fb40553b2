"""The rooms stay tidy: workflows/ is only subpackages, and no two modules share a name for two things."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("workflows", "activities", "starter", "examples/dsmo_examples")
# Names that mean the same thing wherever they appear: a FastAPI app's assembly.
SAME_MEANING = {"app.py"}


def test_workflows_holds_only_subpackages() -> None:
    loose = sorted(path.name for path in (ROOT / "workflows").glob("*.py") if path.name != "__init__.py")
    assert not loose, f"modules outside a subpackage of workflows/: {loose}"
    for package in (ROOT / "workflows").iterdir():
        if package.is_dir() and package.name != "__pycache__":
            assert (package / "__init__.py").is_file(), f"workflows/{package.name} is not a package"


def test_no_module_name_means_two_things() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "__init__.py":
                places[path.name].append(path.relative_to(ROOT).parent.as_posix())
    repeated = {name: where for name, where in places.items() if len(where) > 1 and name not in SAME_MEANING}
    assert not repeated, f"module names used in more than one package: {repeated}"
