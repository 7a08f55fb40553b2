"""The tools study: a tool-using agent's per-turn cost, DSMO beside LangGraph with a Postgres checkpointer.

`agent` is the support agent both run and the model's script; `model` the stub model's process;
`dsmo_side` and `langgraph_side` the two contenders; `tools_report` the section; `study` the
`Study` that runs them (`python -m bench tools`, `make bench TOOLS=1`).
"""
