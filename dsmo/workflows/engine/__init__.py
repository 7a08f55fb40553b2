"""The orchestrator: AgentExecution, which begins a run, steps it through its nodes and ends it."""
