"""`make hostile`: DSMO's entry points and workers fed hostile inputs, in three studies.

`memory` (peak memory of the entry points, and what helper workflows carry: `memory`, `sizes`),
`loop` (an async agent blocking the worker's event loop) and `llm` (hostile model answers).
"""
