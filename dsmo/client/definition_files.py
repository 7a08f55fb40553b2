"""Loading agent definitions from YAML or JSON files, with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dsmo.workflows.common.document_limits import DEFINITION_LIMITS
from dsmo.workflows.common.errors import DefinitionError
from dsmo.workflows.common.identifiers import agent_name_problem
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

MAX_DEFINITION_BYTES = 1_000_000


def load_definition(path: str | Path) -> AgentDefinition:
    """Read, validate and check an agent definition file (YAML or JSON).

    Args:
        path: The file.

    Returns:
        The definition, with its `workflow_version` computed.

    Raises:
        DefinitionError: The file cannot be read or the definition is invalid; the message
            names the file, the field and the reason.
    """
    source = str(path)
    file = Path(path)
    try:
        # Read at most one byte past the cap: a stream (/dev/stdin, /dev/zero) has no size to stat.
        with file.open("rb") as stream:
            raw = stream.read(MAX_DEFINITION_BYTES + 1)
        if len(raw) > MAX_DEFINITION_BYTES:
            raise DefinitionError("", f"file is larger than {MAX_DEFINITION_BYTES} bytes", source=source)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise DefinitionError("", "file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as err:
        raise DefinitionError("", f"cannot read file: {err}", source=source) from None
    return parse_definition_text(text, source=source)


MAX_ALIASES = 100
# A merge key (<<) may repeat; a value key (=) is PyYAML's special case, not a field.
_NOT_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a document with more than MAX_ALIASES alias uses, and a
    mapping that names one key twice.

    An alias bomb (each level repeating the one before) is a few hundred bytes that expand to
    gigabytes; the expanded size is then checked again as a document (dsmo.workflows.common.document_limits).
    A key given twice is an error in YAML 1.2 and JSON's advice, but PyYAML keeps the last one
    silently: a node pasted twice under one name, with the second edited, would run as only one.
    """

    aliases = 0
    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} aliases (*name): expand the document instead")
        # The composer recurses per level: refuse deep nesting before Python's stack runs out.
        self.depth += 1
        try:
            if self.depth > DEFINITION_LIMITS.depth:
                raise yaml.YAMLError(f"nested more than {DEFINITION_LIMITS.depth} levels deep")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_mapping_node(self, anchor: Any) -> Any:
        # Checked as composed, before any merge (<<) rewrites a mapping's pairs: a key its mapping
        # writes twice, not one it overrides from a merge. Keys compare as written, with their tag.
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], Any] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag in _NOT_KEYS:
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise yaml.composer.ComposerError(
                    None, None, f"key {key_node.value!r} given twice (first on line {first})", key_node.start_mark
                )
            seen[key] = key_node
        return node


def parse_definition_text(text: str, *, source: str = "<definition>") -> AgentDefinition:
    """Validate and check an agent definition given as YAML or JSON text.

    Args:
        text: The document.
        source: What to call it in error messages.

    Returns:
        The definition.

    Raises:
        DefinitionError: The definition is invalid (field and reason in the message).
    """
    try:
        # YAML 1.2 is a superset of JSON, so one parser reads both formats.
        data = yaml.load(text, Loader=_BoundedLoader)
    except yaml.YAMLError as err:
        raise DefinitionError("", f"not valid YAML/JSON ({yaml_problem(err)})", source=source) from None
    return parse_definition(data, source=source)


def names_agent(text: str) -> bool:
    """Whether ``text`` names a published agent rather than a definition file: no such file is
    here and it is an agent name (a-z, 0-9 and '-'), as `dsmo start AGENT` takes it.

    Args:
        text: What the user gave.

    Returns:
        True to start the agent's published definition, False to read the file.
    """
    return not Path(text).exists() and agent_name_problem(text) is None


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML parser's error in one line: where (``line L, column C: ``) and what."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return where + (getattr(err, "problem", None) or str(err).splitlines()[0])
