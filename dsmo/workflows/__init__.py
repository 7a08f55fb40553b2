"""Deterministic code only: the agent-definition model, the state machine and the workflow.

Nothing in this package does I/O, reads clocks, draws random numbers or starts threads;
`tests/unit/test_determinism.py` enforces the import rules.
"""
