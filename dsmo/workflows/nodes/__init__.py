"""One module per kind of node: stages (agent and llm), child runs, messages, requests, waits."""
