"""DSMO's example agents, a plugin like any other: importing this package registers them."""

from dsmo.activities.agents import candidates as candidates
from dsmo.activities.agents import documents as documents
from dsmo.activities.agents import llm as llm
