"""`python -m bench table1`: Table 1's experiment alone, and the section the full run writes too.

The experiment's machinery (modes, queue, paired faults, the runner) stays flat in `bench/`:
the full run (`bench.studies.full`) uses it as much as this study does.
"""
