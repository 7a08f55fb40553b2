"""The worker process's runtime: logging an interrupted workflow thread cannot wedge (every DSMO
process flushes it on exit), and the heap the worker builds at start.
"""
