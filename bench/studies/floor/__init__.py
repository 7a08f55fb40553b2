"""`python -m bench floor`: the comparison with raw Temporal and the resume latency, repeated.

The comparison itself (`bench.floor`) stays flat in `bench/`: the full run measures it through
`bench.runner.Bench` too.
"""
