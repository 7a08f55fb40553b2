"""Which variables a person may correct when a run goes back to a node, or is forked from one.

A correction (`--set name=value`) replaces one of the run's variables from that node on. One
that names what DSMO itself keeps (`stages`, `steps`), or that no node from there on reads,
changes nothing the run does: most often a typo, refused before anything is written.
"""

from __future__ import annotations

import re

from dsmo.workflows.definition.model import AgentDefinition
from dsmo.workflows.definition.needed_variables import variables_read

# Variables DSMO keeps, or names conditions see that are not variables: never corrected by hand.
RESERVED = {
    "stages": "holds the stages' outputs (correct the input a stage reads instead)",
    "steps": "holds the saga actions' outputs",
    "run": "is the run's own description, not a variable",
    "config": "is the definition's configuration, not a variable",
}
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def correction_problem(definition: AgentDefinition, node_id: str, name: str) -> str | None:
    """Why ``name`` cannot be corrected for a run that goes on at ``node_id``; None when it can.

    A name can be corrected when it is one of the definition's declared inputs or a variable
    the templates and conditions from ``node_id`` on read.
    """
    if name in RESERVED:
        return f"{name!r} {RESERVED[name]}; it cannot be set"
    if not VARIABLE_NAME.match(name):
        return f"{name!r} is not a variable name (letters, digits and _, not starting with a digit)"
    if name in definition.inputs or name in variables_read(definition, node_id):
        return None
    return f"no node from {node_id!r} on reads {name!r}, and it is not an input of {definition.agent}"
