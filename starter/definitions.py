"""Loading agent definitions from YAML or JSON files, with one-line errors."""

from __future__ import annotations

from pathlib import Path

import yaml

from workflows.definition import AgentDefinition, parse_definition
from workflows.errors import DefinitionError

MAX_DEFINITION_BYTES = 1_000_000


def load_definition(path: str | Path) -> AgentDefinition:
    source = str(path)
    file = Path(path)
    try:
        if file.stat().st_size > MAX_DEFINITION_BYTES:
            raise DefinitionError("", f"file is larger than {MAX_DEFINITION_BYTES} bytes", source=source)
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError("", "file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as err:
        raise DefinitionError("", f"cannot read file: {err}", source=source) from None
    return parse_definition_text(text, source=source)


def parse_definition_text(text: str, *, source: str = "<definition>") -> AgentDefinition:
    try:
        # YAML 1.2 is a superset of JSON, so one parser reads both formats.
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise DefinitionError("", f"not valid YAML/JSON ({where}{problem})", source=source) from None
    return parse_definition(data, source=source)
