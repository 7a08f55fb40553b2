"""DSMO's example agents: importing this package registers them."""

from dsmo_examples.agents import candidates as candidates
from dsmo_examples.agents import documents as documents
from dsmo_examples.agents import llm as llm
