"""The workflows Temporal runs: AgentExecution (begin, step through nodes, end), the rate limiter."""
